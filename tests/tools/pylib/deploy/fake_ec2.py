"""A stand-in for the EC2 Query API on 127.0.0.1 for ec2_backend_test: the AWS CLI, given
--endpoint-url, sends it real requests, which it records ({Action, parameters}) and answers with
minimal valid XML. RunInstances "boots" an instance by running its decoded user-data as a local
bash process (its own process group, R2SP_PREFIX a directory per instance, R2SP_NO_SHUTDOWN=1,
R2SP_ADVERTISE_HOST=127.0.0.1); TerminateInstances kills that process group. The instances'
private address is 127.0.0.1, so hosts of a test cluster must not share ports. With a FakeImds
each instance's R2SP_IMDS_URL is its own path there (and R2SP_SPOT_POLL_S=1); spot_capacity (a
count, None: unlimited) is how many spot instances it grants before it answers
InsufficientInstanceCapacity, as AWS does when a pool is short; reclaim() terminates an instance
as AWS takes a spot instance. The instances inherit `env` (default: this process's environment)."""

import base64
import http.server
import os
import signal
import subprocess
import threading
import urllib.parse

NS = "http://ec2.amazonaws.com/doc/2016-11-15/"


class FakeEc2:
    def __init__(self, work_dir, imds=None, env=None):
        self.work_dir = work_dir
        self.env = env  # the instances' environment (None: this process's, when each starts)
        self.imds = imds
        self.spot_capacity = None
        self.requests = []  # [{"Action": ..., "Param.1": ...}] in arrival order
        self.instances = {}  # id -> {"state", "tags", "process", "user_data"}
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                params = {k: v[0] for k, v in urllib.parse.parse_qs(body, keep_blank_values=True).items()}
                with fake.lock:
                    fake.requests.append(params)
                    status, xml = fake.answer(params)
                data = xml.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/xml")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        for instance in self.instances.values():
            self.stop(instance)

    def actions(self):
        with self.lock:
            return [r["Action"] for r in self.requests]

    def requests_of(self, action):
        with self.lock:
            return [r for r in self.requests if r["Action"] == action]

    @staticmethod
    def stop(instance):
        process = instance.get("process")
        if process and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()

    def answer(self, p):
        action = p["Action"]
        body = getattr(self, "on_" + action, None)
        if body is None:
            return self.error("InvalidAction", f"{action} is not faked")
        if action == "RunInstances" and p.get("InstanceMarketOptions.MarketType") == "spot":
            if self.spot_capacity is not None:
                if self.spot_capacity <= 0:
                    return self.error("InsufficientInstanceCapacity", "There is no Spot capacity "
                                      "available that matches your request.")
                self.spot_capacity -= 1
        return 200, f'<{action}Response xmlns="{NS}"><requestId>r</requestId>{body(p)}</{action}Response>'

    @staticmethod
    def error(code, message):
        return 400, (f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message>"
                     "</Error></Errors><RequestID>x</RequestID></Response>")

    def reclaim(self, instance_id):
        """Terminates the instance as AWS takes a spot instance (its processes killed)."""
        with self.lock:
            self.stop(self.instances[instance_id])
            self.instances[instance_id]["state"] = "terminated"

    def on_DescribeSubnets(self, p):
        return (f"<subnetSet><item><subnetId>{p['SubnetId.1']}</subnetId><vpcId>vpc-fake1</vpcId>"
                "<availabilityZone>us-east-1a</availabilityZone></item></subnetSet>")

    def on_CreateSecurityGroup(self, p):
        return "<return>true</return><groupId>sg-fake1</groupId>"

    def on_AuthorizeSecurityGroupIngress(self, p):
        return "<return>true</return>"

    def on_DeleteSecurityGroup(self, p):
        return "<return>true</return>"

    def on_CreatePlacementGroup(self, p):
        return (f"<return>true</return><placementGroup><groupName>{p['GroupName']}</groupName>"
                f"<strategy>{p['Strategy']}</strategy><state>available</state></placementGroup>")

    def on_DeletePlacementGroup(self, p):
        return "<return>true</return>"

    def on_DescribeImages(self, p):
        return (f"<imagesSet><item><imageId>{p['ImageId.1']}</imageId>"
                "<rootDeviceName>/dev/sda1</rootDeviceName></item></imagesSet>")

    def on_RunInstances(self, p):
        instance_id = f"i-fake{len(self.instances) + 1:04d}"
        tags = {}
        for key, value in p.items():
            if key.startswith("TagSpecification.1.Tag.") and key.endswith(".Key"):
                tags[value] = p[key[:-len("Key")] + "Value"]
        user_data = base64.b64decode(p.get("UserData", "")).decode()
        prefix = os.path.join(self.work_dir, "instances", instance_id)
        os.makedirs(prefix)
        script = os.path.join(prefix, "user_data.sh")
        with open(script, "w") as f:
            f.write(user_data)
        env = dict(self.env or os.environ, R2SP_PREFIX=prefix, R2SP_NO_SHUTDOWN="1", R2SP_ADVERTISE_HOST="127.0.0.1")
        if self.imds:
            env.update(R2SP_IMDS_URL=f"{self.imds.url}/{instance_id}", R2SP_SPOT_POLL_S="1")
        process = subprocess.Popen(["bash", script], env=env, start_new_session=True,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.instances[instance_id] = {"state": "running", "tags": tags, "process": process,
                                       "user_data": user_data,
                                       "spot": p.get("InstanceMarketOptions.MarketType") == "spot"}
        return (f"<reservationId>r-{instance_id}</reservationId><ownerId>1</ownerId><instancesSet>"
                f"{self.instance_xml(instance_id)}</instancesSet>")

    def instance_xml(self, instance_id):
        instance = self.instances[instance_id]
        code = {"running": 16, "terminated": 48}[instance["state"]]
        tags = "".join(f"<item><key>{k}</key><value>{v}</value></item>" for k, v in instance["tags"].items())
        return (f"<item><instanceId>{instance_id}</instanceId><privateIpAddress>127.0.0.1"
                f"</privateIpAddress><instanceState><code>{code}</code><name>{instance['state']}"
                f"</name></instanceState><tagSet>{tags}</tagSet></item>")

    def on_DescribeInstances(self, p):
        filters = {}
        for key, name in p.items():
            if key.startswith("Filter.") and key.endswith(".Name"):
                n = key.split(".")[1]
                filters[name] = {v for k, v in p.items() if k.startswith(f"Filter.{n}.Value.")}
        wanted = set(v for k, v in p.items() if k.startswith("InstanceId."))
        items = []
        for instance_id, instance in self.instances.items():
            if wanted and instance_id not in wanted:
                continue
            if "instance-state-name" in filters and instance["state"] not in filters["instance-state-name"]:
                continue
            if any(name.startswith("tag:") and instance["tags"].get(name[4:]) not in values
                   for name, values in filters.items()):
                continue
            items.append(self.instance_xml(instance_id))
        reservations = "".join(f"<item><reservationId>r-1</reservationId><instancesSet>{i}"
                               "</instancesSet></item>" for i in items)
        return f"<reservationSet>{reservations}</reservationSet>"

    def on_TerminateInstances(self, p):
        items = []
        for key, instance_id in p.items():
            if key.startswith("InstanceId.") and instance_id in self.instances:
                instance = self.instances[instance_id]
                self.stop(instance)
                instance["state"] = "terminated"
                items.append(f"<item><instanceId>{instance_id}</instanceId><currentState><code>48"
                             "</code><name>terminated</name></currentState></item>")
        return f"<instancesSet>{''.join(items)}</instancesSet>"
