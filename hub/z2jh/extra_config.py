# Hub settings for the course on zero-to-jupyterhub, given to the chart with
#   --set-file hub.extraConfig.attention=hub/z2jh/extra_config.py
# The chart runs this inside its jupyterhub_config.py, where `c` is the hub's configuration.
# Roles come from JupyterHub groups (the "instructors" group of values.yaml), not Linux groups:
# every pod runs as the image's user 1000.
PREFIX = "/srv/attention-from-scratch"
EXCHANGE = "/srv/nbgrader/exchange"
COURSE = PREFIX + "/course"
INSTRUCTORS_GROUP = "instructors"
EXCHANGE_CLAIM = "attention-exchange"  # a ReadWriteMany volume every server mounts
COURSE_CLAIM = "attention-course"  # the course repository and gradebook, instructors only


def attention_role(spawner):
    return "instructor" if any(g.name == INSTRUCTORS_GROUP for g in spawner.user.groups) else "student"


def attention_pre_spawn(spawner):
    role = attention_role(spawner)
    spawner.environment.update({
        "JUPYTER_CONFIG_PATH": f"{PREFIX}/jupyter/{role}",
        "ATTENTION_DATA": f"{PREFIX}/data",
        "ATTENTION_EXCHANGE": EXCHANGE,
    })
    volumes = [{"name": "exchange", "persistentVolumeClaim": {"claimName": EXCHANGE_CLAIM}}]
    mounts = [{"name": "exchange", "mountPath": EXCHANGE}]
    if role == "instructor":
        volumes.append({"name": "course", "persistentVolumeClaim": {"claimName": COURSE_CLAIM}})
        mounts.append({"name": "course", "mountPath": COURSE})
        spawner.environment["PYTHONPATH"] = COURSE  # the course's own helpers know its solutions
        spawner.notebook_dir = COURSE
        spawner.mem_limit, spawner.cpu_limit = "6G", 2.0
    spawner.volumes = [*spawner.volumes, *volumes]
    spawner.volume_mounts = [*spawner.volume_mounts, *mounts]


c.KubeSpawner.pre_spawn_hook = attention_pre_spawn  # noqa: F821 -- `c` is the chart's config
