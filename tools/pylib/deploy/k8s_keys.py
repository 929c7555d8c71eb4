"""The job's CurveZMQ keys as Kubernetes sees them (k8s_backend): one Secret per role, holding
the three public keys and that role's secret key only, and the placeholders --dry_run prints
instead of their data."""
import base64
import os

from ..job import keys as job_keys

SECRET_PLACEHOLDER = "<not shown: base64 of {path}>"  # what --dry_run prints for a key


def secret_name(job_name, role):
    return f"{job_name}-keys-{role}"


def key_secret(role, keys, metadata):
    """The Secret of `role`'s keys (`metadata`: its name, secret_name, labels and namespace):
    every public key and the role's own secret key, from {file name: Z85 text} `keys`."""
    names = job_keys.files_for([role])
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": metadata,
            "type": "Opaque",
            "data": {n: base64.b64encode((keys[n] + "\n").encode()).decode() for n in names}}


def read_keys(directory):
    """{file name: key text} of the job's keys in `directory` (for the Secrets only)."""
    return {n: job_keys.read(directory, n) for n in job_keys.files_for(job_keys.ROLES)}


def redacted(manifest, keys_dir):
    """`manifest` as --dry_run prints it: a Secret's data replaced by placeholders naming the
    key files they come from."""
    if manifest.get("kind") != "Secret":
        return manifest
    data = {n: SECRET_PLACEHOLDER.format(path=os.path.join(keys_dir, n)) for n in manifest["data"]}
    return {**manifest, "data": data}
