"""tools/pylib/cluster_file.py: the example cluster files, defaults and overrides, process
numbering and ports, and that every malformed file is refused at the line of its problem."""

import os
import re
import tempfile
import unittest

from pylib.cluster import cluster_file
import junit_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
EXAMPLES = os.path.join(ROOT, "examples", "cluster")
PATH = "jobs/cluster.toml"  # as the messages should show it

# A valid file, one item a line, so that a test can tell the line of what it changes.
JOB = ['[job]', 'mode = "r2sp"']                               # lines 1-2
HOST1 = ['[[host]]', 'name = "a"', 'scheduler = true', 'servers = 1', 'workers = 1']  # 3-7
HOST2 = ['[[host]]', 'name = "b"', 'workers = 2']              # 8-10


def text(*lines):
    return "\n".join(lines) + "\n"


def parse(*lines):
    return cluster_file.parse(text(*lines), PATH)


class ValidFilesTest(unittest.TestCase):
    def test_two_hosts_example(self):
        cluster = cluster_file.load(os.path.join(EXAMPLES, "two_hosts.toml"))
        self.assertEqual((cluster.job_name, cluster.mode), ("cnn-two-hosts", "r2sp"))
        self.assertEqual([(p.name, p.host, p.port, p.gpu) for p in cluster.processes()], [
            ("scheduler", "node1", 9000, None), ("server0", "node1", 9100, None),
            ("server1", "node2", 9100, None), ("worker0", "node1", 9200, None),
            ("worker1", "node1", 9201, None), ("worker2", "node2", 9200, None),
            ("worker3", "node2", 9201, None)])
        self.assertEqual((cluster.num_servers, cluster.num_workers), (2, 4))
        self.assertEqual(cluster.scheduler_host().name, "node1")
        self.assertEqual(cluster.scheduler_endpoint(), "tcp://10.0.0.1:9000")
        self.assertEqual(cluster.flags["server"], ["--lr=0.03", "--momentum=0.9"])
        self.assertEqual(cluster.ssh.options, ("StrictHostKeyChecking=accept-new",))
        self.assertEqual(cluster.auth, "curve")

    def test_multi_host_examples_authenticate(self):
        for name in sorted(os.listdir(EXAMPLES)):
            if name.endswith(".toml"):
                with self.subTest(example=name):
                    cluster = cluster_file.load(os.path.join(EXAMPLES, name))
                    if len(cluster.hosts) > 1:
                        self.assertEqual(cluster.auth, "curve")

    def test_pytorch_example(self):
        cluster = cluster_file.load(os.path.join(EXAMPLES, "pytorch_two_hosts.toml"))
        self.assertEqual([(p.name, p.host, p.worker_cmd) for p in cluster.processes()
                          if p.role == "worker"],
                         [("worker0", "node1", "python3 train.py"),
                          ("worker1", "node1", "python3 train.py"),
                          ("worker2", "node2", "python3 train.py"),
                          ("worker3", "node2", "python3 train.py")])
        self.assertEqual(cluster.flags["worker"], ["--batch_size=64", "--epochs=2"])

    def test_gpu_4x2_example(self):
        cluster = cluster_file.load(os.path.join(EXAMPLES, "gpu_4x2.toml"))
        self.assertEqual([h.name for h in cluster.hosts], ["gpu1", "gpu2", "gpu3", "gpu4"])
        self.assertEqual((cluster.num_servers, cluster.num_workers), (4, 8))
        self.assertEqual(cluster.scheduler_endpoint(), "tcp://10.0.1.11:9000")
        workers = [p for p in cluster.processes() if p.role == "worker"]
        self.assertEqual([(p.name, p.host, p.port, p.gpu) for p in workers[2:4]],
                         [("worker2", "gpu2", 9200, 0), ("worker3", "gpu2", 9201, 1)])
        self.assertEqual([p.gpu for p in workers], [0, 1] * 4)
        self.assertEqual([p.name for p in cluster.hosts[3].processes],
                         ["server3", "worker6", "worker7"])
        self.assertIn("--device=cuda", cluster.flags["worker"])

    def test_defaults(self):
        cluster = parse(*JOB, *HOST1)
        self.assertEqual((cluster.path, cluster.job_name, cluster.workdir, cluster.auth),
                         (PATH, "r2sp", "~/r2sp", "none"))
        self.assertEqual(cluster.ports, {"scheduler": 9000, "server": 9100, "worker": 9200})
        self.assertEqual(cluster.flags, {"scheduler": [], "server": [], "worker": []})
        self.assertEqual(cluster.ssh, cluster_file.Ssh(None, None, None, ()))
        self.assertEqual(cluster.hosts, (cluster_file.Host("a", "a", None, "~/r2sp", None, "", (
            cluster_file.Process("scheduler", "scheduler", "a", 9000, None),
            cluster_file.Process("server0", "server", "a", 9100, None),
            cluster_file.Process("worker0", "worker", "a", 9200, None))),))
        self.assertEqual(cluster.scheduler_endpoint(), "tcp://a:9000")

    def test_host_overrides_and_interface(self):
        cluster = parse('[job]', 'mode = "bsp"', 'workdir = "/opt/r2sp"', '[ssh]', 'port = 22',
                        '[[host]]', 'name = "a"', 'interface = "eth0"', 'scheduler = true',
                        'workdir = "/scratch/r2sp"', 'ssh_port = 2222',
                        '[[host]]', 'name = "b"', 'servers = 1', 'workers = 1',
                        'worker_flags = "--threads=4 --log_every=\'10\'"')
        a, b = cluster.hosts
        self.assertEqual((a.address, a.interface, a.workdir, a.ssh_port), (None, "eth0",
                                                                           "/scratch/r2sp", 2222))
        self.assertEqual((b.address, b.workdir, b.ssh_port), ("b", "/opt/r2sp", 22))
        self.assertEqual(b.worker_flags, "--threads=4 --log_every='10'")
        self.assertEqual(cluster.scheduler_endpoint(), "tcp://a:9000")  # the name, for want of one

    def test_worker_cmd_for_the_job_and_per_host(self):
        cluster = parse(*JOB, 'worker_cmd = "python3 train.py --lr=\'0.1\'"', *HOST1,
                        '[[host]]', 'name = "b"', 'workers = 2', 'worker_cmd = "./t.sh"')
        self.assertEqual([(p.name, p.worker_cmd) for p in cluster.processes()], [
            ("scheduler", ""), ("server0", ""), ("worker0", "python3 train.py --lr='0.1'"),
            ("worker1", "./t.sh"), ("worker2", "./t.sh")])
        cluster = parse(*JOB, *HOST1, *HOST2[:2], 'worker_cmd = "python3 t.py"', *HOST2[2:])
        self.assertEqual([p.worker_cmd for p in cluster.processes() if p.role == "worker"],
                         ["", "python3 t.py", "python3 t.py"])

    def test_ports_number_processes_per_host(self):
        cluster = parse(*JOB, '[ports]', 'scheduler = 7000', 'server = 7100', 'worker = 7200',
                        '[[host]]', 'name = "a"', 'servers = 2', 'workers = 1',
                        '[[host]]', 'name = "b"', 'scheduler = true', 'servers = 1',
                        'workers = 2', 'gpus = [3, 1]')
        self.assertEqual([(p.name, p.host, p.port, p.gpu) for p in cluster.processes()], [
            ("scheduler", "b", 7000, None), ("server0", "a", 7100, None),
            ("server1", "a", 7101, None), ("server2", "b", 7100, None),
            ("worker0", "a", 7200, None), ("worker1", "b", 7200, 3), ("worker2", "b", 7201, 1)])
        self.assertEqual(cluster.scheduler_endpoint(), "tcp://b:7000")


class MalformedFileTest(unittest.TestCase):
    def assertRefused(self, lines, line, *words):
        with self.assertRaises(cluster_file.ClusterFileError) as caught:
            parse(*lines)
        message = str(caught.exception)
        self.assertTrue(message.startswith(f"{PATH}:{line}: "), message)
        for word in words:
            self.assertIn(word, message)

    def test_toml_syntax_error(self):
        self.assertRefused([*JOB, '[[host]]', 'name = a'], 4, "invalid TOML", "line 4")
        self.assertRefused([*JOB, *HOST1, 'workers = 2'], 8, "invalid TOML")  # key given twice
        with self.assertRaisesRegex(cluster_file.ClusterFileError, "^x.toml:3: invalid TOML"):
            cluster_file.parse(text(*JOB) + "x =", "x.toml")  # at the end of the document

    def test_unknown_tables_and_top_level_keys(self):
        self.assertRefused([*JOB, *HOST1, '[jobs]', 'x = 1'], 8, "unknown table [jobs]",
                           "known tables: job, ports, flags, ssh, host")
        self.assertRefused(['mode = "r2sp"', *JOB, *HOST1], 1, "unknown top-level key 'mode'",
                           "known tables: job, ports")
        self.assertRefused([*JOB, *HOST1, '[[hosts]]', 'name = "b"'], 8, "unknown table [[hosts]]")

    def test_not_a_table(self):
        self.assertRefused(['job = "r2sp"', *HOST1], 1, "job must be a table")
        self.assertRefused([*JOB, '[host]', 'name = "a"'], 3, "host must be [[host]] tables")
        self.assertRefused(['ports = 9000', *JOB, *HOST1], 1, "ports must be a table",
                           "integer 9000")

    def test_unknown_keys(self):
        for lines, line, words in [
                ([*JOB, 'nmae = "x"', *HOST1], 3, ["job: unknown key 'nmae'", "known: name, mode"]),
                ([*JOB, '[ports]', 'servers = 1', *HOST1], 4, ["ports: unknown key 'servers'"]),
                ([*JOB, '[flags]', 'trainer = "-v"', *HOST1], 4,
                 ["flags: unknown key 'trainer'", "known: scheduler, server, worker"]),
                ([*JOB, '[ssh]', 'password = "x"', *HOST1], 4, ["ssh: unknown key 'password'"]),
                ([*JOB, *HOST1, 'sever = 1'], 8,
                 ["host 'a': unknown key 'sever'", "known: name, address, interface"]),
                ([*JOB, '[[host]]', 'scheduler = true', '"nmae" = "a"'], 5,
                 ["host #1: unknown key 'nmae'"])]:
            with self.subTest(key=lines[line - 1]):
                self.assertRefused(lines, line, *words)

    def test_wrong_types(self):
        for change, line, words in [
                ('scheduler = "true"', 5, "host 'a': scheduler must be true or false, not "
                                          "string 'true'"),
                ('servers = -1', 6, "servers must be an integer >= 0, not integer -1"),
                ('workers = 1.5', 7, "workers must be an integer >= 0, not float 1.5"),
                ('servers = true', 6, "servers must be an integer >= 0, not boolean True"),
                ('gpu_count = 0', 8, "gpu_count must be an integer >= 1"),
                ('ssh_port = 70000', 8, "ssh_port must be an integer in 1..65535"),
                ('address = ""', 8, "address must be a non-empty string"),
                ('worker_flags = ["-v"]', 8, "worker_flags must be a non-empty string, not array")]:
            key = change.partition(" ")[0]
            host = [l for l in HOST1 if not l.startswith(key + " ")]
            host.insert(line - 3, change)
            with self.subTest(change=change):
                self.assertRefused([*JOB, *host], line, *words)

    def test_bad_ports(self):
        for value, why in [('"9000"', "not string '9000'"), ("9000.0", "not float 9000.0"),
                           ("0", "not integer 0"), ("65536", "not integer 65536")]:
            with self.subTest(value=value):
                self.assertRefused([*JOB, '[ports]', 'server = 9100', f'worker = {value}',
                                    *HOST1], 5, "ports: worker must be an integer in 1..65535",
                                   why)
        self.assertRefused([*JOB, '[ssh]', 'port = 0', *HOST1], 4, "ssh: port must be")
        self.assertRefused([*JOB, '[ssh]', 'options = ["a", 1]', *HOST1], 4,
                           "ssh: options must be a list of non-empty strings")

    def test_mode(self):
        self.assertRefused(['[job]', 'mode = "r2p"', *HOST1], 2,
                           "job: mode must be one of bsp, ssp, asp, r2sp, easgd, eawild, not string 'r2p'")
        self.assertRefused(['[job]', 'name = "x"', *HOST1], 1, "job: mode must be one of",
                           "required")
        self.assertRefused(HOST1, 1, "job: mode must be one of", "required")

    def test_auth(self):
        self.assertEqual(parse('[job]', 'mode = "r2sp"', 'auth = "curve"', *HOST1).auth, "curve")
        self.assertEqual(parse('[job]', 'mode = "r2sp"', 'auth = "none"', *HOST1).auth, "none")
        self.assertRefused(['[job]', 'mode = "r2sp"', 'auth = "tls"', *HOST1], 3,
                           "job: auth must be one of none, curve, not string 'tls'")
        self.assertRefused(['[job]', 'mode = "r2sp"', 'auth = true', *HOST1], 3,
                           "job: auth must be one of none, curve, not boolean True")

    def test_checkpoint_url(self):
        self.assertEqual(parse('[job]', 'mode = "r2sp"', *HOST1).checkpoint_url, "")
        self.assertEqual(parse('[job]', 'mode = "r2sp"', 'checkpoint_url = "file:///nfs/c"',
                               *HOST1).checkpoint_url, "file:///nfs/c")
        self.assertEqual(parse('[job]', 'mode = "r2sp"', 'checkpoint_url = "s3://b/c"',
                               *HOST1).checkpoint_url, "s3://b/c")
        self.assertRefused(['[job]', 'mode = "r2sp"', 'checkpoint_url = "s3://b"', *HOST1], 3,
                           "job: checkpoint_url 's3://b' must be file:///PATH on storage every "
                           "server host shares, or s3://BUCKET/PREFIX")
        self.assertRefused(['[job]', 'mode = "r2sp"', 'checkpoint_url = "file://c"', *HOST1], 3,
                           "job: checkpoint_url 'file://c' must be file:///PATH")

    def test_job_name(self):
        for name in ("my job", "..", "a/b", ""):
            with self.subTest(name=name):
                self.assertRefused(['[job]', f'name = "{name}"', 'mode = "asp"', *HOST1], 2,
                                   "job: name")

    def test_host_name(self):
        self.assertRefused([*JOB, '[[host]]', 'scheduler = true', 'servers = 1'], 3,
                           "host #1: name is required")
        self.assertRefused([*JOB, *HOST1, '[[host]]', 'name = "-oProxyCommand=x"'], 9,
                           "no leading '-'")
        self.assertRefused([*JOB, *HOST1, '[[host]]', 'name = 7'], 9,
                           "host #2: name must be a non-empty string")

    def test_duplicate_host_name(self):
        self.assertRefused([*JOB, *HOST1, '[[host]]', 'workers = 1', 'name = "a"'], 10,
                           "host 'a' appears twice", "first at line 4")

    def test_scheduler_port_inside_the_server_range(self):
        self.assertRefused([*JOB, '[ports]', 'server = 8999', '[[host]]', 'name = "a"',
                            'scheduler = true', 'servers = 2', 'workers = 1'], 8,
                           "host 'a': scheduler and server1 would both listen at port 9000")

    def test_server_range_reaching_the_worker_range(self):
        self.assertRefused([*JOB, '[[host]]', 'name = "a"', 'scheduler = true', 'servers = 101',
                            'workers = 1'], 7,
                           "host 'a': server100 and worker0 would both listen at port 9200")

    def test_a_port_past_65535(self):
        self.assertRefused([*JOB, '[ports]', 'worker = 65535', '[[host]]', 'name = "a"',
                            'scheduler = true', 'servers = 1', 'workers = 2'], 9,
                           "worker1 would listen at port 65536")

    def test_scheduler_count(self):
        self.assertRefused([*JOB, '[[host]]', 'name = "a"', 'servers = 1', 'workers = 1'], 1,
                           "no host runs the scheduler")
        self.assertRefused([*JOB, *HOST1, '[[host]]', 'name = "b"', 'workers = 1',
                            'scheduler = true'], 11, "host 'b': a second scheduler")

    def test_no_server_or_worker(self):
        self.assertRefused([*JOB, '[[host]]', 'name = "a"', 'scheduler = true', 'workers = 1'],
                           1, "no host runs a server")
        self.assertRefused([*JOB, '[[host]]', 'name = "a"', 'scheduler = true', 'servers = 1',
                            'workers = 0'], 1, "no host runs a worker")

    def test_no_hosts(self):
        self.assertRefused(JOB, 1, "no [[host]]")

    def test_gpus(self):
        for gpus, more, words in [
                ("[0]", [], "gpus lists 1 GPUs but workers = 2"),
                ("[0, 2]", ['gpu_count = 2'], "GPU index 2 out of range (want in [0, 2))"),
                ("[0, -1]", [], "GPU index -1 out of range (want >= 0)"),
                ("[1, 1]", [], "GPU 1 is given to two workers"),
                ('[0, "1"]', [], "gpus holds string '1'"),
                ('"0,1"', [], "gpus must be an array")]:
            with self.subTest(gpus=gpus):
                self.assertRefused([*JOB, *HOST1, *HOST2, *more, f'gpus = {gpus}'],
                                   11 + len(more), "host 'b': ", words)

    def test_address_and_interface(self):
        self.assertRefused([*JOB, *HOST1, 'address = "10.0.0.1"', 'interface = "eth0"'], 9,
                           "host 'a': give address or interface, not both")

    def test_bad_worker_cmd(self):
        self.assertRefused([*JOB, 'worker_cmd = "python3 \'t.py"', *HOST1], 3,
                           "job: cannot split worker_cmd \"python3 't.py\" into words: No "
                           "closing quotation")
        self.assertRefused([*JOB, 'worker_cmd = "  "', *HOST1], 3,
                           "job: worker_cmd is blank (leave it out to run the worker binary)")
        self.assertRefused([*JOB, *HOST1, 'worker_cmd = ["python3"]'], 8,
                           "host 'a': worker_cmd must be a non-empty string, not array")
        self.assertRefused([*JOB, *HOST1, 'worker_cmd = ""'], 8,
                           "host 'a': worker_cmd must be a non-empty string, not string ''")

    def test_flags_that_do_not_split(self):
        self.assertRefused([*JOB, '[flags]', 'worker = "--model=\'cnn"', *HOST1], 4,
                           "flags: cannot split worker", "No closing quotation")
        self.assertRefused([*JOB, *HOST1, 'worker_flags = "--x=\\"1"'], 8,
                           "host 'a': cannot split worker_flags")


class LinesTest(unittest.TestCase):
    """The lines named in messages, past what a line-by-line reading would get wrong."""

    def assertLine(self, lines, line):
        with self.assertRaises(cluster_file.ClusterFileError) as caught:
            parse(*lines)
        self.assertTrue(str(caught.exception).startswith(f"{PATH}:{line}: "), caught.exception)

    def test_multi_line_strings_and_arrays_are_skipped(self):
        self.assertLine([*JOB, '[flags]', 'worker = """--a', '[[host]]', 'sever = 1 #"""',
                         '[ssh]', 'options = [', '  "A=1", # ]', '  "[job]",', ']',
                         *HOST1, 'sever = 2'], 17)

    def test_quoted_keys_and_spaced_headers(self):
        self.assertLine([*JOB, '[ "ssh" ]  # comment', "'port' = 0", *HOST1], 4)

    def test_inline_table_falls_back_to_its_key(self):
        self.assertLine([*JOB, 'ports = { worker = 0 }', *HOST1], 3)

    def test_subtable_of_a_host(self):
        self.assertLine([*JOB, *HOST1, '[host.extra]', 'x = 1'], 8)

    def test_load_names_the_path_it_was_given(self):
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "bad.toml")
            with open(path, "w") as f:
                f.write(text(*JOB, *HOST1, 'gpus = [0, 0]'))
            with self.assertRaisesRegex(cluster_file.ClusterFileError, f"^{re.escape(path)}:8: "):
                cluster_file.load(path)
            with open(path, "wb") as f:
                f.write(b"[job]\nmode = \"\xff\"\n")
            with self.assertRaisesRegex(cluster_file.ClusterFileError,
                                        f"^{re.escape(path)}:2: not UTF-8"):
                cluster_file.load(path)


if __name__ == "__main__":
    junit_main.main()
