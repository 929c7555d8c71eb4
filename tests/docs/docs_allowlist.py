"""The docs check's exceptions, each with its reason: flags (program, or None for an
unattributed one) and paths the docs rightly name although no --help lists them or the
repository does not hold them. Keep them few: a wrong flag or path belongs fixed in the docs."""

FLAGS = {
    (None, "validate"): "kubectl's (docs/DEPLOY.md: kubectl apply --dry-run=client --validate)",
    (None, "instance-market-options"): "the AWS CLI's run-instances option (docs/DEPLOY.md)",
    (None, "placement"): "the AWS CLI's run-instances option (docs/DEPLOY.md)",
    (None, "instance-initiated-shutdown-behavior"): "the AWS CLI's run-instances option",
    (None, "name"): "docs/PYTORCH.md: how r2sp.init spells a True setting (--NAME)",
    (None, "noname"): "docs/PYTORCH.md: how r2sp.init spells a False setting (--noNAME)",
    (None, "system-site-packages"): "python3 -m venv's option (docs/PYTORCH.md)",
}

PATHS = {
}

# Options no document needs to give for their program (test_every_option_is_documented).
UNDOCUMENTED = {
}

# Programs whose options are documented as another's: {program: the other}.
DOCUMENTED_AS = {
    "tools/netcluster": "tools/launch",  # README: it takes tools/launch's options, bar five
}
