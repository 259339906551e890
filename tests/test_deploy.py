"""The fleet recipe in deploy/ is checked for syntax and consistency (there is no container engine on CI): the YAML
parses into what docker compose and Kubernetes expect, the Dockerfile's instructions and sources exist, every
shell script passes `bash -n`, and the `deskhand run` command the agent's entrypoint builds parses."""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import yaml

from app.__main__ import build_parser

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
INSTRUCTIONS = {"FROM", "ARG", "RUN", "COPY", "ADD", "ENV", "WORKDIR", "USER", "VOLUME", "EXPOSE", "ENTRYPOINT",
                "CMD", "LABEL", "HEALTHCHECK", "SHELL", "STOPSIGNAL", "ONBUILD"}


def test_every_shell_script_parses():
    scripts = sorted(DEPLOY.rglob("*.sh"))
    assert {p.name for p in scripts} >= {"entrypoint.sh", "serve-holotron-12b.sh", "serve-holo31.sh",
                                        "serve-holo4.sh", "serve-holotron4.sh"}
    for path in scripts:
        result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, f"{path}: {result.stderr}"
        assert os.access(path, os.X_OK), f"{path} is not executable"


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())  # line continuations
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_the_agent_dockerfile_is_well_formed():
    steps = dockerfile_instructions(DEPLOY / "agent" / "Dockerfile")
    assert all(word in INSTRUCTIONS for word, _ in steps), [w for w, _ in steps if w not in INSTRUCTIONS]
    words = [w for w, _ in steps]
    assert all(w == "ARG" for w in words[:words.index("FROM")])  # only ARGs before the first FROM
    for word, rest in steps:
        if word in ("COPY", "ADD") and "--from=" not in rest:
            *sources, _dest = shlex.split(rest)
            for src in sources:
                assert (ROOT / src).exists(), f"the build context (repository root) has no {src}"
    entry = next(rest for word, rest in steps if word == "ENTRYPOINT")
    argv = json.loads(entry)  # the exec form: signals reach tini
    assert argv[:2] == ["tini", "--"]
    copied = {shlex.split(rest)[-1]: shlex.split(rest)[0] for word, rest in steps if word == "COPY"}
    assert copied[argv[2]] == "deploy/agent/entrypoint.sh"
    run = " ".join(rest for word, rest in steps if word == "RUN")
    assert "installers/source/install.sh" in run and "tini" in run and "xvfb" in run and "jwm" in run


def test_the_compose_file_wires_the_agents_to_the_server():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services, volumes = compose["services"], compose["volumes"]
    assert set(services) == {"vllm", "agent"}
    for service in services.values():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            assert (source.startswith(".") and (DEPLOY / source).exists()) or source in volumes, mount
    vllm, agent = services["vllm"], services["agent"]
    gpu = vllm["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["driver"] == "nvidia" and gpu["capabilities"] == ["gpu"] and "count" in gpu
    script = vllm["entrypoint"][-1]
    assert script.startswith("/opt/deskhand-vllm/") and (DEPLOY / "vllm" / Path(script).name).exists()
    assert "/health" in " ".join(vllm["healthcheck"]["test"])
    assert agent["depends_on"]["vllm"]["condition"] == "service_healthy"
    assert (DEPLOY / agent["build"]["context"]).resolve() == ROOT
    assert (DEPLOY / agent["build"]["context"] / agent["build"]["dockerfile"]).exists()
    env = agent["environment"]
    assert env["DESKHAND_ENGINE_URL"] == "http://vllm:8000/v1" and env["DESKHAND_ALLOW_HTTP"] == "1"
    assert "trajectories:/trajectories" in agent["volumes"]
    assert "datasets:/home/agent/.cache/huggingface" in agent["volumes"]  # the eval's benchmarks, kept


def test_the_kubernetes_manifests_are_a_server_and_an_indexed_job():
    docs = [d for f in sorted((DEPLOY / "k8s").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert kinds == {("Deployment", "deskhand-vllm"), ("Service", "deskhand-vllm"),
                     ("PersistentVolumeClaim", "deskhand-trajectories"), ("Job", "deskhand-agents")}
    assert all(d["apiVersion"] in ("v1", "apps/v1", "batch/v1") for d in docs)
    by_kind = {d["kind"]: d for d in docs}
    job = by_kind["Job"]["spec"]
    assert job["completionMode"] == "Indexed" and job["parallelism"] >= 1 and job["completions"] >= 1
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    assert claims == {"deskhand-trajectories"}
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    service = by_kind["Service"]
    assert env["DESKHAND_ENGINE_URL"] == f"http://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}/v1"
    deployment = by_kind["Deployment"]["spec"]
    assert deployment["selector"]["matchLabels"] == deployment["template"]["metadata"]["labels"]
    assert service["spec"]["selector"] == deployment["selector"]["matchLabels"]
    server = deployment["template"]["spec"]["containers"][0]
    assert server["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert (DEPLOY / "vllm" / Path(server["command"][-1]).name).exists()
    readme = (DEPLOY / "README.md").read_text()
    for cm in (v["configMap"]["name"] for d in docs if d["kind"] in ("Deployment", "Job")
               for v in d["spec"]["template"]["spec"]["volumes"] if "configMap" in v):
        assert f"kubectl create configmap {cm} " in readme, f"deploy/README.md does not say how {cm} is made"


def test_the_entrypoint_builds_a_deskhand_run_command_that_parses(tmp_path):
    env = {"PATH": os.environ["PATH"], "DESKHAND_DRY_RUN": "1", "DESKHAND_ENGINE_URL": "http://vllm:8000/v1",
           "DESKHAND_TASK": "Save the file as 'notes.txt'", "DESKHAND_SERVED_MODEL": "Hcompany/Holotron-12B",
           "DESKHAND_ALLOW_HTTP": "1", "DESKHAND_MAX_TILES": "6", "DESKHAND_OUT": str(tmp_path)}
    out = subprocess.run(["bash", str(DEPLOY / "agent" / "entrypoint.sh")], env=env, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    argv = shlex.split(out.stdout)
    assert argv[:2] == ["deskhand", "run"]
    args = build_parser().parse_args(argv[1:])
    assert args.engine == "http://vllm:8000/v1" and args.task == "Save the file as 'notes.txt'"
    assert args.served_model == "Hcompany/Holotron-12B" and args.allow_http and args.max_tiles == 6
    assert args.auto_approve == "all" and args.display == ":99" and args.json


def test_the_entrypoint_measures_the_server_with_the_apps_model_test(tmp_path):
    """DESKHAND_EVAL_SUITE: `deskhand eval grounding` with the sample Settings → General → "Test on this computer"
    runs (50 items, seed 0), against the model server, into the output volume; the image's user owns the hub
    cache a volume is mounted on."""
    env = {"PATH": os.environ["PATH"], "DESKHAND_DRY_RUN": "1", "DESKHAND_ENGINE_URL": "http://vllm:8000/v1",
           "DESKHAND_EVAL_SUITE": "screenspot-v2", "DESKHAND_SERVED_MODEL": "Hcompany/Holotron-12B",
           "DESKHAND_ALLOW_HTTP": "1", "DESKHAND_MAX_TILES": "7", "DESKHAND_OUT": str(tmp_path)}
    out = subprocess.run(["bash", str(DEPLOY / "agent" / "entrypoint.sh")], env=env, capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    argv = shlex.split(out.stdout)
    assert argv[:3] == ["deskhand", "eval", "grounding"]
    args = build_parser().parse_args(argv[1:])
    from app.eval.trial.sample import SAMPLE_ITEMS, SAMPLE_SEED, command_line

    assert (args.suite, args.limit, args.seed) == ("screenspot-v2", SAMPLE_ITEMS, SAMPLE_SEED)
    assert " ".join(argv[:9]) == command_line("screenspot-v2")  # the app's test, word for word
    assert args.engine == "http://vllm:8000/v1" and args.served_model == "Hcompany/Holotron-12B"
    assert args.allow_http and args.max_tiles == 7 and args.json and args.out.startswith(f"{tmp_path}/evals/")
    env["DESKHAND_EVAL_DATA"] = "/data/screenspot-v2"
    out = subprocess.run(["bash", str(DEPLOY / "agent" / "entrypoint.sh")], env=env, capture_output=True,
                         text=True, timeout=30)
    assert build_parser().parse_args(shlex.split(out.stdout)[1:]).data == "/data/screenspot-v2"
    steps = dockerfile_instructions(DEPLOY / "agent" / "Dockerfile")
    run = " ".join(rest for word, rest in steps if word == "RUN")
    assert "mkdir -p /home/agent/.cache/huggingface" in run and "chown -R agent:agent /home/agent/.cache" in run
    readme = (DEPLOY / "README.md").read_text()
    assert "DESKHAND_EVAL_SUITE=screenspot-v2" in readme and "/home/agent/.cache/huggingface" in readme


def test_the_serve_scripts_pass_their_flags_to_vllm(tmp_path):
    """With a stand-in `vllm` on PATH that prints its arguments: the flags reach vllm serve as separate words."""
    fake = tmp_path / "vllm"
    fake.write_text("#!/usr/bin/env bash\nprintf '%s\\n' \"$@\"\n")
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}", "MAX_NUM_SEQS": "64"}
    for script, model in (("serve-holotron-12b.sh", "Hcompany/Holotron-12B"),
                          ("serve-holo31.sh", "Hcompany/Holo-3.1-35B-A3B-FP8"),
                          ("serve-holo4.sh", "Hcompany/Holo4-35B-A3B-FP8"),
                          ("serve-holotron4.sh", "Hcompany/Holotron4-30B-A3B")):
        out = subprocess.run(["bash", str(DEPLOY / "vllm" / script)], env=env, capture_output=True, text=True)
        words = out.stdout.splitlines()
        assert out.returncode == 0 and words[:2] == ["serve", model], out.stderr
        flags = dict(itertools.pairwise(words))  # each flag -> the word after it
        assert json.loads(flags["--limit-mm-per-prompt"])["video"] == 0 and flags["--max-num-seqs"] == "64"
        assert "#" not in " ".join(words)  # comments stay out of the command line
        if script in ("serve-holo4.sh", "serve-holotron4.sh"):  # native tool calls, as the profiles send them
            from app.engine.family import profile_for_served_model

            assert flags["--tool-call-parser"] == "qwen3_coder" and "--enable-auto-tool-choice" in words
            assert profile_for_served_model(flags["--served-model-name"]) == script[len("serve-"):-len(".sh")]
    assert json.loads(dict(itertools.pairwise(subprocess.run(
        ["bash", str(DEPLOY / "vllm" / "serve-holo4.sh")], env=env, capture_output=True, text=True
    ).stdout.splitlines()))["--limit-mm-per-prompt"])["image"] == 5  # H's guide; the holo4 profile's budget
