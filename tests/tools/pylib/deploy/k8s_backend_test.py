"""tools/launch --backend=k8s without a Kubernetes cluster.

- The manifests' structure: kinds, names, selectors against labels, counts, GPU limits, env,
  ports, the headless Service.
- kubectl's offline checks. With no API server, `kubectl create/apply --dry-run=client` cannot
  run at all (kubectl 1.20 and 1.32, KUBECONFIG empty: "The connection to the server
  localhost:8080 was refused", and with --validate=false: 'unable to recognize "FILE": Get
  "http://localhost:8080/api?timeout=32s": dial tcp 127.0.0.1:8080: connect: connection
  refused'); `kubectl convert` is gone from 1.20 ('unknown command "convert"'). What does run
  offline is `kubectl set image --local -f FILE` (workloads) and `kubectl set selector --local`
  (Services): they decode the file with kubectl's own typed scheme, so an unknown kind or
  apiVersion and a value of the wrong type fail, and an unknown field is dropped; the test
  checks that everything we wrote comes back (the image aside, which set image changes). Fields
  newer than the kubectl at hand (Debian 12's is 1.20: no Indexed Jobs) are allowed to vanish.
  kubectl: $R2SP_KUBECTL, else the one on PATH; skipped without one.
- The pods' commands: the bundle (tools/package on the built binaries) runs each pod's command
  and environment from the manifests, as Kubernetes would give them (downward API, Indexed Job
  index), each pod in its own network namespace (netcluster) where /etc/hosts answers for the
  Services' names as cluster DNS would; a job completes and the logs' result blocks decode to
  the scheduler's stats and the workers' metrics. Needs root; skipped otherwise.
- --auth=curve: one Secret per role with the public keys and that role's secret key only, each
  pod mounting its own role's read-only with defaultMode 0400, R2SP_AUTH=curve; the Secrets'
  files 0600; --dry_run printing placeholders, never a key; the entrypoint's flags; and the pods
  of a curve job, each given its own Secret's files as a mounted volume would, completing it.
- Python workers (worker_cmd): every worker runs R2SP_WORKER_CMD through the entrypoint, from
  the bundle's worker_files/ with exactly the binary's flags (python_bundle.py), and the pods'
  job completes.
- The results blocks taken out of a fabricated log."""

import base64
import contextlib
import copy
import io
import json
import os
import re
import shutil
import stat
import subprocess
import tarfile
import tempfile
import unittest

from pylib.cluster import cluster_file
import junit_main
from pylib.deploy import k8s_backend, k8s_kubectl
from pylib.deploy import k8s_yaml
from pylib.emulation import netcluster
from pylib.job import errors, options
import python_bundle

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN_DIR = os.environ.get("R2SP_BIN_DIR", ROOT)  # the runfiles under Bazel
JOB = "k8s-test"
WORKER_FLAGS = "--model=synthetic --model_mb=1 --layers=4 --iterations=5 --compute_ms=20 --log_every=1"


def cluster(hosts='scheduler = true\nservers = 2\nworkers = 2', worker_flags=WORKER_FLAGS, extra=""):
    return cluster_file.parse(f"""[job]
name = "{JOB}"
mode = "bsp"
[flags]
worker = "{worker_flags}"
{extra}
[[host]]
name = "a"
{hosts}
""")


# The keys a render gets (read_keys' form): recognisable text, so that a test can look for it.
KEYS = {f"{role}.{kind}": f"KEY-{role}-{kind}-0123456789abcdefghijklmnopq"
        for role in ("scheduler", "server", "worker") for kind in ("pub", "key")}
PUBLIC = ["scheduler.pub", "server.pub", "worker.pub"]
ROLE_FILES = {"scheduler": "11-scheduler-deployment.yaml", "server": "21-server-statefulset.yaml",
              "worker": "30-worker-job.yaml"}


def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def pod_spec(manifest):
    return manifest["spec"]["template"]["spec"]


class ManifestTest(unittest.TestCase):
    def setUp(self):
        self.m = k8s_backend.render(cluster(), JOB, "r2sp:1-cpu", "ml")
        self.by_kind = {(d["kind"], d["metadata"]["name"]): d for d in self.m.values()}

    def test_objects_and_names(self):
        self.assertEqual(sorted(self.by_kind), [
            ("Deployment", "k8s-test-scheduler"), ("Job", "k8s-test-worker"),
            ("Service", "k8s-test-scheduler"), ("Service", "k8s-test-server"),
            ("StatefulSet", "k8s-test-server")])
        for d in self.m.values():
            self.assertRegex(d["metadata"]["name"], r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
            self.assertEqual(d["metadata"]["namespace"], "ml")

    def test_dns_label(self):
        self.assertEqual(k8s_backend.dns_label("Cnn_GPU.4x2"), "cnn-gpu-4x2")
        self.assertEqual(k8s_backend.dns_label("1st..run"), "r2sp-1st-run")
        self.assertLessEqual(len(k8s_backend.dns_label("x" * 100)), 40)

    def test_selectors_match_their_pods(self):
        for d in self.m.values():
            if d["kind"] == "Service":
                pods = [w for w in self.m.values() if w["kind"] != "Service" and
                        all(w["spec"]["template"]["metadata"]["labels"].get(k) == v
                            for k, v in d["spec"]["selector"].items())]
                self.assertEqual(len(pods), 1, d["metadata"]["name"])
            elif d["kind"] in ("Deployment", "StatefulSet"):
                labels = d["spec"]["template"]["metadata"]["labels"]
                for k, v in d["spec"]["selector"]["matchLabels"].items():
                    self.assertEqual(labels[k], v)

    def test_counts_and_policies(self):
        self.assertEqual(self.by_kind["Deployment", "k8s-test-scheduler"]["spec"]["replicas"], 1)
        servers = self.by_kind["StatefulSet", "k8s-test-server"]["spec"]
        self.assertEqual((servers["replicas"], servers["podManagementPolicy"], servers["serviceName"]),
                         (2, "Parallel", "k8s-test-server"))
        job = self.by_kind["Job", "k8s-test-worker"]["spec"]
        self.assertEqual((job["completions"], job["parallelism"], job["completionMode"], job["backoffLimit"]),
                         (2, 2, "Indexed", 0))
        self.assertEqual(pod_spec(self.by_kind["Job", "k8s-test-worker"])["restartPolicy"], "Never")

    def test_services(self):
        scheduler = self.by_kind["Service", "k8s-test-scheduler"]["spec"]
        self.assertEqual(scheduler["type"], "ClusterIP")
        self.assertEqual([p["port"] for p in scheduler["ports"]], [9000])
        servers = self.by_kind["Service", "k8s-test-server"]["spec"]
        self.assertEqual(servers["clusterIP"], "None")
        self.assertEqual([p["port"] for p in servers["ports"]], [9100])

    def test_env_and_ports(self):
        for (kind, name), role, port in ((("Deployment", "k8s-test-scheduler"), "scheduler", 9000),
                                         (("StatefulSet", "k8s-test-server"), "server", 9100),
                                         (("Job", "k8s-test-worker"), "worker", 9200)):
            container = pod_spec(self.by_kind[kind, name])["containers"][0]
            env = env_of(container)
            self.assertEqual(container["args"], [role])
            self.assertEqual(container["command"], [k8s_backend.ENTRYPOINT])
            self.assertEqual(container["ports"][0]["containerPort"], port)
            self.assertEqual(env["R2SP_PORT"], str(port))
            self.assertEqual(env["POD_IP"], {"fieldRef": {"fieldPath": "status.podIP"}})
            if role != "scheduler":
                self.assertEqual(env["R2SP_SCHEDULER"], "tcp://k8s-test-scheduler:9000")
        scheduler = env_of(pod_spec(self.by_kind["Deployment", "k8s-test-scheduler"])["containers"][0])
        self.assertEqual((scheduler["R2SP_NUM_SERVERS"], scheduler["R2SP_NUM_WORKERS"], scheduler["R2SP_SYNC"]),
                         ("2", "2", "bsp"))
        worker = env_of(pod_spec(self.by_kind["Job", "k8s-test-worker"])["containers"][0])
        self.assertEqual(worker["R2SP_FLAGS"], WORKER_FLAGS)
        server = env_of(pod_spec(self.by_kind["StatefulSet", "k8s-test-server"])["containers"][0])
        self.assertEqual(server["R2SP_ADVERTISE_HOST"], "$(POD_NAME).k8s-test-server")

    def worker_resources(self, manifests):
        container = pod_spec(manifests["30-worker-job.yaml"])["containers"][0]
        return container.get("resources")

    def test_gpu_limits_only_for_gpu_workers(self):
        self.assertIsNone(self.worker_resources(self.m))
        with_gpus = k8s_backend.render(cluster(hosts="scheduler = true\nservers = 1\nworkers = 2\ngpus = [0, 1]"),
                                       JOB, "i", None)
        self.assertEqual(self.worker_resources(with_gpus), {"limits": {"nvidia.com/gpu": "1"}})
        cuda = k8s_backend.render(cluster(worker_flags="--device=cuda"), JOB, "i", None,
                                  gpu_resource="gpu.example.com/a100")
        self.assertEqual(self.worker_resources(cuda), {"limits": {"gpu.example.com/a100": "1"}})
        self.assertNotIn("namespace", cuda["30-worker-job.yaml"]["metadata"])
        cpu_again = k8s_backend.render(cluster(worker_flags="--device=cuda --device=cpu"), JOB, "i", None)
        self.assertIsNone(self.worker_resources(cpu_again))

    def test_different_worker_flags_per_host_are_refused(self):
        two = cluster(hosts='scheduler = true\nservers = 1\nworkers = 1\nworker_flags = "--threads=2"\n'
                            '[[host]]\nname = "b"\nworkers = 1')
        with self.assertRaisesRegex(errors.JobError, "one pod template"):
            k8s_backend.render(two, JOB, "i", None)

    def test_python_workers_get_their_command(self):
        python = cluster(hosts='scheduler = true\nservers = 1\nworkers = 3\n'
                               'worker_cmd = "python3 t.py --x=\'a b\'"')
        container = pod_spec(k8s_backend.render(python, JOB, "i", None)["30-worker-job.yaml"])[
            "containers"][0]
        self.assertEqual((container["command"], container["args"]),
                         ([k8s_backend.ENTRYPOINT], ["worker"]))
        self.assertEqual(env_of(container), {
            "POD_IP": {"fieldRef": {"fieldPath": "status.podIP"}},
            "POD_NAME": {"fieldRef": {"fieldPath": "metadata.name"}},
            "R2SP_SCHEDULER": "tcp://k8s-test-scheduler:9000", "R2SP_EMIT_RESULTS": "1",
            "R2SP_WORKER_CMD": "python3 t.py --x='a b'", "R2SP_NUM_WORKERS": "3",
            "R2SP_PORT": "9200", "R2SP_OUT": k8s_backend.OUT_DIR, "R2SP_FLAGS": WORKER_FLAGS})
        self.assertNotIn("R2SP_WORKER_CMD", env_of(pod_spec(self.m["30-worker-job.yaml"])
                                                   ["containers"][0]))

    def test_different_worker_commands_are_refused(self):
        mixed = cluster(hosts='scheduler = true\nservers = 1\nworkers = 1\n'
                              'worker_cmd = "python3 t.py"\n[[host]]\nname = "b"\nworkers = 1')
        with self.assertRaises(errors.JobError) as e:
            k8s_backend.render(mixed, JOB, "i", None)
        self.assertEqual(str(e.exception), "k8s runs every worker from one pod template, but the "
                         "workers run different commands: ['', 'python3 t.py'] ('' is the worker "
                         "binary)")

    def test_image_defaults_to_the_bundle_name(self):
        self.assertEqual(k8s_backend.image_for(cluster(), "/x/r2sp-0.6.0-cuda.tar.gz"), "r2sp:0.6.0-cuda")
        named = cluster(extra='[k8s]\nimage = "reg.example/r2sp:7"')
        self.assertEqual(k8s_backend.image_for(named, None), "reg.example/r2sp:7")


class KeysTest(unittest.TestCase):
    def setUp(self):
        self.m = k8s_backend.render(cluster(), JOB, "r2sp:1-cpu", "ml", keys=KEYS)

    def secrets(self):
        return {d["metadata"]["name"]: d for d in self.m.values() if d["kind"] == "Secret"}

    def test_one_secret_per_role_with_only_that_roles_secret_key(self):
        secrets = self.secrets()
        self.assertEqual(sorted(secrets), ["k8s-test-keys-scheduler", "k8s-test-keys-server",
                                           "k8s-test-keys-worker"])
        for role in ("scheduler", "server", "worker"):
            secret = secrets[f"k8s-test-keys-{role}"]
            self.assertEqual((secret["type"], secret["metadata"]["namespace"]), ("Opaque", "ml"))
            self.assertEqual(sorted(secret["data"]), sorted(PUBLIC + [role + ".key"]))
            for name, value in secret["data"].items():
                self.assertEqual(base64.b64decode(value).decode(), KEYS[name] + "\n")
        # Applied before the pods that mount them.
        self.assertLess(max(n for n, d in self.m.items() if d["kind"] == "Secret"), min(ROLE_FILES.values()))

    def test_each_pod_mounts_its_own_roles_secret_read_only_0400(self):
        for role, file in ROLE_FILES.items():
            spec = pod_spec(self.m[file])
            container = spec["containers"][0]
            self.assertEqual(spec["volumes"], [{"name": "keys", "secret": {
                "secretName": f"k8s-test-keys-{role}", "defaultMode": 0o400}}])
            self.assertEqual(container["volumeMounts"], [{"name": "keys", "mountPath": "/etc/r2sp/keys",
                                                          "readOnly": True}])
            self.assertEqual(env_of(container)["R2SP_AUTH"], "curve")
            self.assertNotIn("securityContext", spec)  # an fsGroup would make the keys group-readable
        # The worker's pods reach no Secret but their own: never the scheduler's or the servers' keys.
        worker = json.dumps(self.m["30-worker-job.yaml"])
        for other in ("k8s-test-keys-scheduler", "k8s-test-keys-server", "scheduler.key", "server.key"):
            self.assertNotIn(other, worker)
        self.assertIn("defaultMode: 256", k8s_yaml.dump(self.m["30-worker-job.yaml"]))  # = 0400

    def test_no_key_outside_the_secrets(self):
        for name, manifest in self.m.items():
            if manifest["kind"] != "Secret":
                text = json.dumps(manifest)
                for key in KEYS.values():
                    self.assertNotIn(key, text, name)
                    self.assertNotIn(base64.b64encode((key + "\n").encode()).decode(), text, name)

    def test_without_auth_no_secrets(self):
        plain = k8s_backend.render(cluster(), JOB, "r2sp:1-cpu", "ml")
        self.assertFalse([d for d in plain.values() if d["kind"] == "Secret"])
        self.assertNotIn("R2SP_AUTH", json.dumps(plain))
        self.assertNotIn("volumes", json.dumps(plain))

    def test_secret_files_are_the_users_only(self):
        d = tempfile.mkdtemp(prefix="k8s_keys_test.")
        self.addCleanup(shutil.rmtree, d, True)
        paths = k8s_backend.write_manifests(self.m, os.path.join(d, "k8s"))
        for path in paths:
            kind = self.m[os.path.basename(path)]["kind"]
            self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600 if kind == "Secret" else 0o644, path)

    def test_describe_prints_placeholders_not_keys(self):
        d = tempfile.mkdtemp(prefix="k8s_keys_test.")
        self.addCleanup(shutil.rmtree, d, True)
        paths = k8s_backend.write_manifests(self.m, os.path.join(d, "k8s"))
        text = k8s_backend.describe(paths, k8s_kubectl.Kubectl("ml"), JOB, self.m, "/run/keys")
        for key in KEYS.values():
            self.assertNotIn(key, text)
            self.assertNotIn(base64.b64encode((key + "\n").encode()).decode(), text)
        self.assertIn('worker.key: "<not shown: base64 of /run/keys/worker.key>"', text)
        self.assertEqual(text.count("kind: Secret"), 3)

    def test_a_dry_run_writes_nothing_and_prints_no_key(self):
        d = tempfile.mkdtemp(prefix="k8s_keys_test.")
        self.addCleanup(shutil.rmtree, d)
        run_dir = os.path.join(d, "run")
        args = options.parse_args(["--cluster=x", "--backend=k8s", "--dry_run", "--auth=curve",
                                   "--bin_dir=" + os.path.join(d, "bin"), "--run_dir=" + run_dir], "")
        c = cluster()
        args.sync, args.servers, args.workers = c.mode, c.num_servers, c.num_workers
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertIsNone(k8s_backend.run(args, c, "/d/r2sp-1.0-cpu.tar.gz"))
        self.assertFalse(os.path.exists(run_dir))  # neither keys nor manifests
        self.assertEqual(os.listdir(d), [])
        keys = os.path.join(run_dir, "keys")
        for role in ("scheduler", "server", "worker"):
            self.assertIn(f"<not shown: base64 of {keys}/{role}.key>", out.getvalue())
            self.assertIn(f"# --- {run_dir}/k8s/0{('scheduler', 'server', 'worker').index(role) + 1}"
                          f"-{role}-keys-secret.yaml", out.getvalue())
        self.assertIn(f"kubectl apply -f {run_dir}/k8s", out.getvalue())


class YamlTest(unittest.TestCase):
    def test_text(self):
        self.assertEqual(k8s_yaml.dump({"a": [{"b": 1, "c": "yes"}, "x y"], "d": {}, "e": True}),
                         'a:\n- b: 1\n  c: "yes"\n- "x y"\nd: {}\ne: true\n')

    def test_round_trip_where_a_yaml_reader_exists(self):
        try:
            import yaml
        except ImportError:
            self.skipTest("no PyYAML here (the kubectl check below also reads the files)")
        for d in k8s_backend.render(cluster(), JOB, "r2sp:1-cpu", "ml").values():
            self.assertEqual(yaml.safe_load(k8s_yaml.dump(d)), d)


def kubectl():
    path = os.environ.get("R2SP_KUBECTL") or shutil.which("kubectl")
    return path if path and os.access(path, os.X_OK) else None


# Fields the Kubernetes API gained after some kubectl versions: path -> the minor version.
NEWER_FIELDS = {"spec.completionMode": 21}
CHECK_IMAGE = "r2sp-offline-check:0"


def not_kept(want, got, path=""):
    """The paths of `want` that `got` lacks or holds otherwise."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [path or "."]
        return [p for k, v in want.items() for p in
                (not_kept(v, got[k], f"{path}.{k}".lstrip(".")) if k in got else [f"{path}.{k}".lstrip(".")])]
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return [path]
        return [p for i, (w, g) in enumerate(zip(want, got)) for p in not_kept(w, g, f"{path}[{i}]")]
    return [] if want == got else [path]


@unittest.skipIf(kubectl() is None, "no kubectl (Debian package kubernetes-client)")
class KubectlOfflineTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="k8s_kubectl_test.")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.kubeconfig = os.path.join(cls.dir, "kubeconfig")  # empty: no cluster to reach
        open(cls.kubeconfig, "w").close()
        r = cls.kubectl("version", "--client", "-o", "json")
        cls.minor = int(re.match(r"\d+", json.loads(r.stdout)["clientVersion"]["minor"]).group())

    @classmethod
    def kubectl(cls, *args):
        return subprocess.run([kubectl(), *args], capture_output=True, text=True, errors="replace", timeout=60,
                              env={**os.environ, "KUBECONFIG": cls.kubeconfig})

    def decoded(self, manifest):
        """kubectl's typed decoding of `manifest` written as YAML: (exit status, object, error)."""
        path = os.path.join(self.dir, "m.yaml")
        with open(path, "w") as f:
            f.write(k8s_yaml.dump(manifest))
        if manifest["kind"] == "Service":
            selector = ",".join(f"{k}={v}" for k, v in manifest["spec"]["selector"].items())
            r = self.kubectl("set", "selector", "--local", "-f", path, selector, "-o", "json")
        else:
            r = self.kubectl("set", "image", "--local", "-f", path, f"*={CHECK_IMAGE}", "-o", "json")
        return r.returncode, json.loads(r.stdout) if r.returncode == 0 and r.stdout else None, r.stderr

    def problems(self, manifest):
        """What kubectl rejects or drops of `manifest` (fields newer than kubectl aside)."""
        code, got, error = self.decoded(manifest)
        if code != 0 or got is None:
            return [f"kubectl: {error.strip() or 'no output'}"]
        want = copy.deepcopy(manifest)
        if manifest["kind"] != "Service":
            for container in want["spec"]["template"]["spec"]["containers"]:
                container["image"] = CHECK_IMAGE
        return [p for p in not_kept(want, got) if NEWER_FIELDS.get(p, 0) <= self.minor]

    def test_every_manifest_survives_kubectls_decoding(self):
        gpu = cluster(hosts="scheduler = true\nservers = 1\nworkers = 2\ngpus = [0, 1]")
        for c, keys in ((cluster(), None), (gpu, None), (cluster(), KEYS)):
            for name, manifest in k8s_backend.render(c, JOB, "r2sp:1-cpu", "ml", image_pull_secret="regcred",
                                                     deadline_s=600, keys=keys).items():
                if manifest["kind"] == "Secret":
                    # No offline command decodes a Secret typed (label --local keeps anything);
                    # KeysTest checks their structure.
                    continue
                self.assertEqual(self.problems(manifest), [], name)

    def test_the_check_can_fail(self):
        m = k8s_backend.render(cluster(), JOB, "r2sp:1-cpu", None)
        misspelt = copy.deepcopy(m["21-server-statefulset.yaml"])
        misspelt["spec"]["podManagmentPolicy"] = misspelt["spec"].pop("podManagementPolicy")
        self.assertEqual(self.problems(misspelt), ["spec.podManagmentPolicy"])
        wrong_type = copy.deepcopy(m["11-scheduler-deployment.yaml"])
        wrong_type["spec"]["replicas"] = "one"
        self.assertRegex(self.problems(wrong_type)[0], "kubectl: .*[Rr]eplicas")
        wrong_kind = copy.deepcopy(m["30-worker-job.yaml"])
        wrong_kind["kind"] = "Jobs"
        self.assertRegex(self.problems(wrong_kind)[0], 'no kind "Jobs"')
        bad_service = copy.deepcopy(m["10-scheduler-service.yaml"])
        bad_service["spec"]["ports"][0]["port"] = "9000"
        self.assertTrue(self.problems(bad_service))


class ExtractResultsTest(unittest.TestCase):
    def block(self, name, files):
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w:gz") as t:
            for path, text in files.items():
                info = tarfile.TarInfo(path)
                info.size = len(text)
                t.addfile(info, io.BytesIO(text))
        encoded = base64.encodebytes(data.getvalue()).decode()
        return f"R2SP-RESULTS-BEGIN {name}\n{encoded}R2SP-RESULTS-END\n"

    def test_blocks_become_files_and_leave_the_log(self):
        d = tempfile.mkdtemp(prefix="k8s_extract_test.")
        self.addCleanup(shutil.rmtree, d, True)
        log = os.path.join(d, "worker0.log")
        with open(log, "w") as f:
            f.write("iteration 1\n" + self.block("worker0", {"./metrics_worker0.jsonl": b'{"i": 1}\n',
                                                             "../escape": b"x", "./sub/deep": b"y"})
                    + "after\nR2SP-RESULTS-BEGIN cut\nAAAA\n")
        self.assertEqual(k8s_backend.extract_results(log, d), ["metrics_worker0.jsonl"])
        with open(os.path.join(d, "metrics_worker0.jsonl")) as f:
            self.assertEqual(f.read(), '{"i": 1}\n')
        with open(log) as f:
            self.assertEqual(f.read(), "iteration 1\nafter\n")
        self.assertFalse(os.path.exists(os.path.join(os.path.dirname(d), "escape")))

    def test_a_corrupt_block_is_an_error(self):
        d = tempfile.mkdtemp(prefix="k8s_extract_test.")
        self.addCleanup(shutil.rmtree, d, True)
        log = os.path.join(d, "scheduler.log")
        with open(log, "w") as f:
            f.write("R2SP-RESULTS-BEGIN scheduler\nnot base64!\nR2SP-RESULTS-END\n")
        with self.assertRaises(errors.JobError):
            k8s_backend.extract_results(log, d)


BUNDLE = {}


def bundle_dir():
    """The unpacked release bundle of the built binaries (made once)."""
    if not BUNDLE:
        d = tempfile.mkdtemp(prefix="k8s_bundle.")
        r = subprocess.run([os.path.join(ROOT, "tools", "package"), "--bin_dir=" + BIN_DIR, "--out=" + d],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        subprocess.run(["tar", "xzf", r.stdout.split()[1], "-C", d], check=True)
        BUNDLE["dir"] = next(os.path.join(d, n) for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)))
    return BUNDLE["dir"]


def remove_bundle():
    """Removes bundle_dir's bundle (tearDownModule of every test module that made one)."""
    if BUNDLE:
        shutil.rmtree(os.path.dirname(BUNDLE.pop("dir")), ignore_errors=True)


def tearDownModule():
    remove_bundle()


def container_env(container, fields):
    """The container's environment as Kubernetes gives it: values with $(VAR) expanded from the
    variables before them, downward-API fields from `fields` ({fieldPath: value})."""
    env = {}
    for e in container["env"]:
        if "value" in e:
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])
        else:
            env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def pod_argv(container, bundle):
    command = [c.replace(k8s_backend.INSTALL_DIR, bundle) for c in container["command"]]
    return command + container["args"]


@unittest.skipIf(netcluster.can_run(), netcluster.can_run() or "")
class PodsInNamespacesTest(unittest.TestCase):
    """Each pod of the rendered job in its own namespace, names resolved as cluster DNS would."""

    PODS = {  # netcluster host -> (manifest, pod name, completion index)
        "scheduler": ("11-scheduler-deployment.yaml", "k8s-test-scheduler-5f7c9-x2x4q", None),
        "server0": ("21-server-statefulset.yaml", "k8s-test-server-0", None),
        "server1": ("21-server-statefulset.yaml", "k8s-test-server-1", None),
        "worker0": ("30-worker-job.yaml", "k8s-test-worker-0-hj2kd", "0"),
        "worker1": ("30-worker-job.yaml", "k8s-test-worker-1-9qz8w", "1"),
    }

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="k8s_pods_test.")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.bundle = bundle_dir()
        self.cluster = netcluster.Cluster(list(self.PODS), {})
        self.addCleanup(self.cluster.down)
        self.cluster.up()
        a = self.cluster.addresses
        names = [f"{a['scheduler']} k8s-test-scheduler"] + [
            f"{a[f'server{k}']} k8s-test-server-{k}.k8s-test-server" for k in range(2)]
        for host, (_, pod, _) in self.PODS.items():
            # `ip netns exec NS` mounts /etc/netns/NS/hosts over /etc/hosts.
            etc = os.path.join("/etc/netns", self.cluster.ns(host))
            os.makedirs(etc)
            self.addCleanup(shutil.rmtree, etc, True)
            with open(os.path.join(etc, "hosts"), "w") as f:
                f.write("\n".join(["127.0.0.1 localhost", f"{a[host]} {pod}"] + names) + "\n")

    def mount_secret(self, manifests, pod_spec_, host):
        """The pod's keys volume as Kubernetes would mount it: its Secret's items as files of the
        volume's defaultMode, in a directory of the pod's own; returns the directory."""
        volume = pod_spec_["volumes"][0]["secret"]
        secret = next(d for d in manifests.values()
                      if d["kind"] == "Secret" and d["metadata"]["name"] == volume["secretName"])
        directory = os.path.join(self.dir, host + "-keys")
        os.makedirs(directory)
        for name, value in secret["data"].items():
            path = os.path.join(directory, name)
            with open(path, "wb") as f:
                f.write(base64.b64decode(value))
            os.chmod(path, volume["defaultMode"])
        return directory

    def test_the_pods_run_a_job_and_print_their_results(self):
        self.run_pods(k8s_backend.render(cluster(), JOB, "r2sp:test", None))

    def test_the_pods_of_a_curve_job_each_with_its_roles_secret(self):
        keys = os.path.join(self.dir, "keys")
        r = subprocess.run([os.path.join(BIN_DIR, "common", "auth", "keygen"), keys],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        logs = self.run_pods(k8s_backend.render(cluster(), JOB, "r2sp:test", None,
                                                keys=k8s_backend.read_keys(keys)))
        self.assertIn("--auth=curve --keys_dir=", logs["worker0"])
        self.assertEqual(sorted(os.listdir(os.path.join(self.dir, "worker0-keys"))),
                         sorted(PUBLIC + ["worker.key"]))
        for name in os.listdir(keys):
            with open(os.path.join(keys, name)) as f:
                key = f.read().strip()
            for host, log in logs.items():
                self.assertNotIn(key, log, f"{name} in {host}'s log")

    def test_the_pods_of_python_workers(self):
        made = python_bundle.make(self.dir, BIN_DIR)
        subprocess.run(["tar", "xzf", made, "-C", self.dir], check=True)
        self.bundle = os.path.join(self.dir, os.path.basename(made).removesuffix(".tar.gz"))
        records = os.path.join(self.dir, "records")
        os.makedirs(records)
        command = python_bundle.COMMAND.format(records=records)
        python = cluster(hosts=f'scheduler = true\nservers = 2\nworkers = 2\nworker_cmd = "{command}"')
        self.run_pods(k8s_backend.render(python, JOB, "r2sp:test", None))
        for rank in (0, 1):
            out = os.path.join(self.dir, f"worker{rank}")
            flags = [f"--advertise_host={self.cluster.addresses[f'worker{rank}']}",
                     "--bind=tcp://0.0.0.0:9200", f"--metrics={out}/metrics_worker{rank}.jsonl",
                     f"--timeline={out}/timeline_worker{rank}.json",
                     "--scheduler=tcp://k8s-test-scheduler:9000"] + WORKER_FLAGS.split()
            with open(os.path.join(records, f"{rank}.json")) as f:
                self.assertEqual(json.load(f), python_bundle.expected(
                    self.bundle, "k8s-test-scheduler", 9000, rank, 2, 0, flags), rank)

    def run_pods(self, manifests):
        """Runs every pod of `manifests` to its end; checks they all exit 0 and the results
        blocks; returns {host: its log}."""
        procs = {}
        for host, (file, pod, index) in self.PODS.items():
            spec = pod_spec(manifests[file])
            container = spec["containers"][0]
            env = container_env(container, {"status.podIP": self.cluster.addresses[host],
                                            "metadata.name": pod})
            env["R2SP_OUT"] = os.path.join(self.dir, host)  # each container's own file system
            if "volumes" in spec:  # where its keys would be mounted
                env["R2SP_KEYS_DIR"] = self.mount_secret(manifests, spec, host)
            if index is not None:
                env["JOB_COMPLETION_INDEX"] = index  # what Kubernetes adds in an Indexed Job
            with open(os.path.join(self.dir, host + ".log"), "wb") as log:
                procs[host] = subprocess.Popen(
                    self.cluster.exec_prefix(host) + pod_argv(container, self.bundle),
                    env={"PATH": os.environ["PATH"], "HOME": "/root", **env},
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        codes = {}
        for host, proc in procs.items():
            try:
                codes[host] = proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[host] = "timeout"
        logs = {h: open(os.path.join(self.dir, h + ".log"), errors="replace").read() for h in procs}
        self.assertEqual(codes, dict.fromkeys(procs, 0), "\n".join(f"--- {h}\n{t[-3000:]}" for h, t in logs.items()))
        self.assertIn("--advertise_host=k8s-test-server-1.k8s-test-server", logs["server1"])
        results = os.path.join(self.dir, "results")
        os.makedirs(results)
        found = {h: sorted(k8s_backend.extract_results(os.path.join(self.dir, h + ".log"), results))
                 for h in ("scheduler", "worker0", "worker1")}
        self.assertEqual(found, {"scheduler": ["stats.json"],
                                 "worker0": ["metrics_worker0.jsonl", "timeline_worker0.json"],
                                 "worker1": ["metrics_worker1.jsonl", "timeline_worker1.json"]})
        with open(os.path.join(results, "stats.json")) as f:
            stats = json.load(f)
        self.assertEqual((len(stats["workers"]), len(stats["servers"])), (2, 2))
        for k in range(2):
            with open(os.path.join(results, f"metrics_worker{k}.jsonl")) as f:
                self.assertEqual(len(f.read().splitlines()), 5)
        self.assertNotIn("R2SP-RESULTS", open(os.path.join(self.dir, "worker0.log")).read())
        return logs


class EntrypointTest(unittest.TestCase):
    """The entrypoint's failures, without namespaces."""

    def run_pod(self, env):
        out = tempfile.mkdtemp(prefix="k8s_entrypoint_test.")
        self.addCleanup(shutil.rmtree, out, True)
        entrypoint = os.path.join(bundle_dir(), "share", "r2sp", "deploy", "k8s_entrypoint")
        return subprocess.run([entrypoint, "worker"], capture_output=True, text=True, timeout=60,
                              env={"PATH": os.environ["PATH"], "R2SP_OUT": out, **env})

    def test_a_failing_worker_passes_its_status_on_and_still_prints_its_results(self):
        r = self.run_pod({"JOB_COMPLETION_INDEX": "3", "R2SP_EMIT_RESULTS": "1",
                          "R2SP_FLAGS": "--no_such_flag '--model=synthetic'"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--no_such_flag --model=synthetic", r.stderr)
        self.assertRegex(r.stdout, r"R2SP-RESULTS-BEGIN worker3\n[A-Za-z0-9+/=\n]+R2SP-RESULTS-END\n$")

    def test_a_worker_needs_its_index(self):
        r = self.run_pod({})
        self.assertEqual(r.returncode, 2)
        self.assertIn("JOB_COMPLETION_INDEX", r.stderr)

    def test_auth_from_the_environment(self):
        r = self.run_pod({"JOB_COMPLETION_INDEX": "0", "R2SP_AUTH": "curve", "R2SP_FLAGS": "--no_such_flag"})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--auth=curve --keys_dir=/etc/r2sp/keys", r.stderr)
        r = self.run_pod({"JOB_COMPLETION_INDEX": "0", "R2SP_AUTH": "curve", "R2SP_KEYS_DIR": "/k",
                          "R2SP_FLAGS": "--no_such_flag"})
        self.assertIn("--auth=curve --keys_dir=/k", r.stderr)
        r = self.run_pod({"JOB_COMPLETION_INDEX": "0", "R2SP_AUTH": "tls"})
        self.assertEqual(r.returncode, 2)
        self.assertIn("R2SP_AUTH must be none or curve, not 'tls'", r.stderr)
        r = self.run_pod({"JOB_COMPLETION_INDEX": "0", "R2SP_FLAGS": "--no_such_flag"})
        self.assertNotIn("--auth", r.stderr)


# A stand-in kubectl: records its calls; `get` shows the pods finished and the Job in the state
# $FAKE_JOB_STATE (with $FAKE_SCHEDULER_EXIT set: the worker's index failed, killed, and the
# scheduler exited with that status); `logs -f POD` prints POD's log from $FAKE_LOGS/POD.
FAKE_KUBECTL = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_CALLS"], "a") as f:
    f.write(" ".join(args) + "\\n")
if "get" in args:
    pods = [{"kind": "Pod", "metadata": {"name": n, "labels": {"app.kubernetes.io/component": c},
             "annotations": {"batch.kubernetes.io/job-completion-index": i} if i else {}},
             "status": {"phase": "Succeeded"}}
            for n, c, i in (("j-scheduler-1-2", "scheduler", None), ("j-server-0", "server", None),
                            ("j-worker-0-x", "worker", "0"))]
    job = {"kind": "Job", "status": {"conditions": [{"type": os.environ["FAKE_JOB_STATE"], "status": "True"}]}}
    if "FAKE_SCHEDULER_EXIT" in os.environ:
        exited = lambda code: [{"state": {"terminated": {"exitCode": code}}}]
        pods[0]["status"]["containerStatuses"] = exited(int(os.environ["FAKE_SCHEDULER_EXIT"]))
        pods[2]["status"] = {"phase": "Failed", "containerStatuses": exited(137)}
        job["status"]["failedIndexes"] = "0"
        job["status"]["conditions"][0]["reason"] = "FailedIndexes"
    print(json.dumps({"items": pods + [job]}))
elif "logs" in args:
    with open(os.path.join(os.environ["FAKE_LOGS"], args[-1])) as f:
        sys.stdout.write(f.read())
"""


class RunWithStandInKubectlTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="k8s_run_test.")
        self.addCleanup(shutil.rmtree, self.dir, True)
        bin_dir, logs = os.path.join(self.dir, "bin"), os.path.join(self.dir, "logs")
        os.makedirs(bin_dir)
        os.makedirs(logs)
        with open(os.path.join(bin_dir, "kubectl"), "w") as f:
            f.write(FAKE_KUBECTL)
        os.chmod(os.path.join(bin_dir, "kubectl"), 0o755)
        block = ExtractResultsTest.block
        with open(os.path.join(logs, "j-scheduler-1-2"), "w") as f:
            f.write("scheduler up\n" + block(self, "scheduler", {
                "./stats.json": b'{"workers": [{"iterations": 5, "bytes_pushed": 10}], "servers": []}'}))
        with open(os.path.join(logs, "j-worker-0-x"), "w") as f:
            f.write("iteration 5\n" + block(self, "worker0", {"./metrics_worker0.jsonl": b""}))
        with open(os.path.join(logs, "j-server-0"), "w") as f:
            f.write("server up\n")
        self.calls = os.path.join(self.dir, "calls")
        saved = dict(os.environ)
        self.addCleanup(lambda: (os.environ.clear(), os.environ.update(saved)))
        os.environ.update(PATH=bin_dir + os.pathsep + os.environ["PATH"], FAKE_CALLS=self.calls,
                          FAKE_LOGS=logs)

    def run_job(self, state):
        os.environ["FAKE_JOB_STATE"] = state
        c = cluster(hosts="scheduler = true\nservers = 1\nworkers = 1", extra='[k8s]\nnamespace = "ml"')
        args = options.parse_args(["--cluster=x", "--backend=k8s", "--timeout=30",
                                    "--run_dir=" + os.path.join(self.dir, "run")], "")
        args.sync, args.servers, args.workers = c.mode, c.num_servers, c.num_workers
        return args, lambda: k8s_backend.run(args, c, "/d/r2sp-1.0-cpu.tar.gz")

    def called(self):
        with open(self.calls) as f:
            return f.read().splitlines()

    def test_a_completed_job_leaves_logs_results_and_summary_and_is_deleted(self):
        args, go = self.run_job("Complete")
        summary = go()
        self.assertEqual((summary["iterations"], summary["bytes_pushed"]), (5, 10))
        for name in ("stats.json", "metrics_worker0.jsonl", "summary.json", "k8s/30-worker-job.yaml"):
            self.assertTrue(os.path.exists(os.path.join(args.run_dir, name)), name)
        with open(os.path.join(args.run_dir, "worker0.log")) as f:
            self.assertEqual(f.read(), "iteration 5\n")
        calls = self.called()
        self.assertEqual(calls[0], f"--namespace ml apply -f {args.run_dir}/k8s")
        self.assertEqual(calls[-1], f"--namespace ml delete --ignore-not-found --wait=false -f {args.run_dir}/k8s")

    def test_a_failed_index_is_a_death_and_the_scheduler_decides(self):
        os.environ["FAKE_SCHEDULER_EXIT"] = "0"
        args, go = self.run_job("Failed")
        go()
        with open(os.path.join(args.run_dir, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["deaths"]["worker"], summary["restarts"]["worker"]), (1, 0))
        self.assertEqual([(e["process"], e["event"], e["status"]) for e in summary["events"]],
                         [("worker0", "died", 137)])
        os.environ["FAKE_SCHEDULER_EXIT"] = "1"
        args, go = self.run_job("Failed")
        with self.assertRaisesRegex(errors.JobError, r"^workers \[0\] failed and the scheduler "
                                                     r"exited with status 1; see the logs in "):
            go()

    def test_a_failed_job_is_an_error_and_is_deleted(self):
        args, go = self.run_job("Failed")
        with self.assertRaisesRegex(errors.JobError, "Job failed"):
            go()
        self.assertIn("delete", self.called()[-1])


if __name__ == "__main__":
    junit_main.main()
