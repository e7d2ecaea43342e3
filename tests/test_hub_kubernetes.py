"""The course past one machine, checked offline: no Kubernetes cluster runs here, so what can be
checked without one is — the chart's values file, the user image's recipe (hub/install.sh on the
Dockerfile's path builds the environment, and the image's environment is the hub's student
environment), and the hub settings of hub/z2jh/extra_config.py loaded with KubeSpawner
installed, building the pod of a student and of an instructor."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import classhub
import yaml
from conftest import ROOT
from hubtools import HUB_ENV

Z2JH = ROOT / "hub" / "z2jh"
IMAGE_PREFIX = "/srv/attention-from-scratch"
CHECK_ENV = Path(os.environ.get("HUB_K8S_CHECK_ENV", "/var/tmp/attention-z2jh-check"))
KUBECONFIG = """apiVersion: v1
kind: Config
current-context: offline
clusters: [{name: offline, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: offline, context: {cluster: offline, user: offline, namespace: attention}}]
users: [{name: offline, user: {token: offline}}]
"""
# Builds a student's and an instructor's pod from the hub settings, without a cluster.
POD_CHECK = r'''
import asyncio, json, sys
from traitlets.config import Config
from kubespawner import KubeSpawner

c = Config()
path = sys.argv[1]
exec(compile(open(path).read(), path, "exec"), {"c": c})

class Group:
    def __init__(self, name):
        self.name = name

async def pods():
    out = {}
    for role, groups in (("instructor", ["instructors"]), ("student", ["students"])):
        spawner = KubeSpawner(config=c, _mock=True)
        spawner.user.groups = [Group(g) for g in groups]
        spawner.run_pre_spawn_hook()
        pod = await spawner.get_pod_manifest()
        box = pod.spec.containers[0]
        claims = {}
        for v in pod.spec.volumes:
            v = v if isinstance(v, dict) else v.to_dict()
            claim = v.get("persistentVolumeClaim") or v.get("persistent_volume_claim")
            if claim:
                claims[v["name"]] = claim.get("claimName") or claim.get("claim_name")
        out[role] = {"env": {e.name: e.value for e in box.env},
                     "mounts": {m.name: m.mount_path for m in box.volume_mounts},
                     "claims": claims, "limits": box.resources.limits}
    return out

print(json.dumps(asyncio.run(pods()), default=str))
'''


def _values() -> dict:
    return yaml.safe_load((Z2JH / "values.yaml").read_text())


def _dockerfile_env() -> dict[str, str]:
    text = (Z2JH / "Dockerfile").read_text()
    block = re.search(r"^ENV (.*?)(?=^\S)", text, re.S | re.M).group(1)
    return dict(re.findall(r"(\w+)=(\S+)", block.replace("\\\n", " ")))


def test_the_values_file_sets_limits_culling_and_no_internet():
    values = _values()
    user = values["singleuser"]
    assert user["cmd"] == "jupyterhub-singleuser" and user["defaultUrl"] == "/lab"
    student_memory = classhub.parse_bytes(classhub.Settings.student_memory)
    assert classhub.parse_bytes(user["memory"]["limit"]) == student_memory
    assert float(user["cpu"]["limit"]) == classhub.Settings.student_cpus
    assert user["networkPolicy"]["egressAllowRules"]["nonPrivateIPs"] is False
    assert values["cull"]["enabled"] and values["cull"]["timeout"] == classhub.Settings.cull_after_s
    groups = values["hub"]["config"]["JupyterHub"]["load_groups"]
    assert "instructors" in groups, "extra_config.py gives the instructor role to this group"
    install = "--set-file hub.extraConfig.attention=hub/z2jh/extra_config.py"
    assert install in (Z2JH / "values.yaml").read_text()


def test_the_shared_volumes_are_the_ones_the_hub_mounts():
    claims = {doc["metadata"]["name"] for doc in yaml.safe_load_all((Z2JH / "volumes.yaml").read_text())}
    extra = (Z2JH / "extra_config.py").read_text()
    named = set(re.findall(r'_CLAIM = "([^"]+)"', extra))
    assert claims == named == {"attention-exchange", "attention-course"}
    for doc in yaml.safe_load_all((Z2JH / "volumes.yaml").read_text()):
        assert doc["spec"]["accessModes"] == ["ReadWriteMany"], "every server mounts them at once"


def test_the_image_gives_a_student_the_hubs_student_environment():
    text = (Z2JH / "Dockerfile").read_text()
    assert re.search(r"COURSE_COPY=no PROXY=no \\\s*/opt/attention-from-scratch-src/hub/install.sh "
                     + re.escape(IMAGE_PREFIX), text), "the image must run make hub's own install"
    assert 'CMD ["jupyterhub-singleuser"]' in text and "USER 1000" in text
    student = classhub.user_environment(classhub.Settings(prefix=Path(IMAGE_PREFIX)), "student")
    image = _dockerfile_env()
    for key in ("ATTENTION_DATA", "ATTENTION_EXCHANGE", "JUPYTER_CONFIG_PATH"):
        assert image[key] == student[key], key
    assert image["PATH"].startswith(student["PATH"].split(":")[0])


def test_the_image_recipe_builds_the_course_environment(tmp_path):
    """The Dockerfile's RUN step, on this machine: same script, same options, a scratch prefix.
    The environment itself is the one the class hub test uses when it exists (building it again
    takes minutes); the script's own steps all run."""
    prefix = tmp_path / "srv"
    env = {**os.environ, "COURSE_COPY": "no", "PROXY": "no", "HUB_EXCHANGE": str(tmp_path / "exchange")}
    if (HUB_ENV / "bin" / "python").exists() and os.access(HUB_ENV, os.W_OK):
        env["HUB_ENV"] = str(HUB_ENV)
    proc = subprocess.run([str(ROOT / "hub" / "install.sh"), str(prefix)], env=env, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert not (prefix / "course").exists() and not (prefix / "proxy").exists()
    python = Path(env.get("HUB_ENV", prefix / "env")) / "bin" / "python"
    probe = "import helpers.trained as t, jupyterhub; print(len(t.load_results()), jupyterhub.__version__)"
    ran = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                         env={"ATTENTION_DATA": str(prefix / "data"), "PATH": "/usr/bin:/bin"})
    assert ran.returncode == 0, ran.stderr[-2000:]
    page = json.loads((prefix / "jupyter" / "student" / "labconfig" / "page_config.json").read_text())
    assert page == classhub.role_settings("student")["labconfig/page_config.json"]


def test_the_hub_settings_load_with_kubespawner_and_build_both_pods(tmp_path):
    if not (CHECK_ENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(CHECK_ENV)], check=True)
        proc = subprocess.run([str(CHECK_ENV / "bin" / "python"), "-m", "pip", "install", "--quiet",
                               "--disable-pip-version-check", "-r", str(Z2JH / "requirements-check.txt")],
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stderr[-2000:]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    script = tmp_path / "pods.py"
    script.write_text(POD_CHECK)
    proc = subprocess.run([str(CHECK_ENV / "bin" / "python"), str(script), str(Z2JH / "extra_config.py")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KUBECONFIG": str(kubeconfig)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    pods = json.loads(proc.stdout.strip().splitlines()[-1])
    student, instructor = pods["student"], pods["instructor"]
    expected = classhub.user_environment(classhub.Settings(prefix=Path(IMAGE_PREFIX)), "student")
    for key in ("ATTENTION_DATA", "ATTENTION_EXCHANGE", "JUPYTER_CONFIG_PATH"):
        assert student["env"][key] == expected[key], key
    assert instructor["env"]["JUPYTER_CONFIG_PATH"].endswith("/jupyter/instructor")
    assert instructor["env"]["PYTHONPATH"] == f"{IMAGE_PREFIX}/course"
    assert "PYTHONPATH" not in student["env"]
    assert student["claims"] == {"exchange": "attention-exchange"}, "students never mount the course"
    assert instructor["claims"] == {"exchange": "attention-exchange", "course": "attention-course"}
    assert instructor["mounts"]["course"] == f"{IMAGE_PREFIX}/course"
    assert student["mounts"]["exchange"] == expected["ATTENTION_EXCHANGE"]
