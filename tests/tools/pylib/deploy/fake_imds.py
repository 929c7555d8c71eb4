"""A stand-in for the EC2 instance metadata service (IMDSv2) on 127.0.0.1, one per test, serving
every fake instance under its own path: an instance's R2SP_IMDS_URL is URL/INSTANCE_ID. PUT
latest/api/token gives a token; GET latest/meta-data/local-ipv4 and
latest/meta-data/spot/instance-action need it (401 without); the interruption notice is 404
until interrupt(INSTANCE_ID), as on a spot instance AWS has not yet marked."""

import http.server
import json
import threading


class FakeImds:
    def __init__(self):
        self.marked = {}  # instance id -> the notice's JSON text
        self.requests = []  # (method, path, token given) in arrival order
        self.lock = threading.Lock()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_PUT(self):
                fake.serve(self, "PUT")

            def do_GET(self):
                fake.serve(self, "GET")

            def log_message(self, *_):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def interrupt(self, instance_id, when="2026-11-27T03:00:00Z"):
        """Marks the instance for interruption, as AWS does two minutes before it takes it."""
        with self.lock:
            self.marked[instance_id] = json.dumps({"action": "terminate", "time": when})

    def notices_read(self, instance_id):
        """How many times the instance read its interruption notice with a valid token."""
        with self.lock:
            return sum(1 for method, path, token in self.requests if method == "GET" and
                       path == f"/{instance_id}/latest/meta-data/spot/instance-action" and
                       token == "token-" + instance_id)

    def answer(self, method, path, token):
        instance_id, _, rest = path.lstrip("/").partition("/")
        if method == "PUT" and rest == "latest/api/token":
            return 200, "token-" + instance_id
        if method != "GET" or token != "token-" + instance_id:
            return 401, ""
        if rest == "latest/meta-data/local-ipv4":
            return 200, "127.0.0.1"
        if rest == "latest/meta-data/spot/instance-action" and instance_id in self.marked:
            return 200, self.marked[instance_id]
        return 404, ""

    def serve(self, request, method):
        token = request.headers.get("X-aws-ec2-metadata-token")
        with self.lock:
            self.requests.append((method, request.path, token))
            status, text = self.answer(method, request.path, token)
        data = text.encode()
        request.send_response(status)
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)
