"""JupyterHub for a class of Attention from Scratch; `make hub` starts it (see docs/hub.md).
The settings come from the environment: HUB_PREFIX, HUB_PORT, HUB_IP, HUB_EXCHANGE,
HUB_STUDENT_MEMORY, HUB_STUDENT_CPUS, HUB_INSTRUCTOR_MEMORY, HUB_INSTRUCTOR_CPUS, HUB_CULL_AFTER
(seconds), HUB_SSL_CERT and HUB_SSL_KEY (HTTPS)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import classhub  # noqa: E402

c = get_config()  # noqa: F821 -- provided by JupyterHub when it reads this file
classhub.configure(c, classhub.Settings.from_env())
