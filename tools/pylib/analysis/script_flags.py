"""How tools/compare_modes runs a PyTorch script (--script) in every configuration: the command
line the r2sp configurations give tools/launch --worker_cmd (the script through the r2sp
client, which takes the job's worker flags itself), and the one a ddp configuration gives
--ddp_cmd, whose settings must be passed as the script's own flags. Those come from the same
job options, so both run the same per-worker batch, epochs, seed, step limit, pacing and data:
  worker flags  --batch_size --epochs --seed --max_steps --emulate_ms_per_sample --data_dir
  server flags  --lr --momentum, the script's SGD settings under DDP and through R2SP alike (R2SP's
                servers apply the script's optimizer to a global batch's averaged gradient, as
                DDP's all-reduce averages, so the same lr applies unscaled)
Other worker flags (--model, --threads, codecs, ...) are the C++ worker's or R2SP's and have no
DDP counterpart; the script's own flags (--script_flags, e.g. --threads=1) go to both. With
--data_order=r2sp (compare_modes' default) DDP also trains the R2SP job's batches."""

import shlex

WORKER_SETTINGS = ("batch_size", "epochs", "seed", "max_steps", "emulate_ms_per_sample",
                   "data_dir")
SERVER_SETTINGS = ("lr", "momentum")


def _values(flags, names):
    """{name: the last value of --NAME=VALUE or --NAME VALUE in the flag list `flags`}."""
    found = {}
    for i, flag in enumerate(flags):
        for name in names:
            if flag.startswith(f"--{name}="):
                found[name] = flag.split("=", 1)[1]
            elif flag == f"--{name}" and i + 1 < len(flags):
                found[name] = flags[i + 1]
    return found


def settings(text, names):
    """The flags of `names` that the flag string `text` sets, as --NAME=VALUE in the order of
    `names` (later values win, as gflags reads them). ValueError if `text` does not split."""
    try:
        flags = shlex.split(text)
    except ValueError as e:
        raise ValueError(f"cannot split the flags {text!r}: {e}") from None
    values = _values(flags, names)
    return [f"--{name}={values[name]}" for name in names if name in values]


def ddp_flags(worker_flags, server_flags):
    """The script flags of a ddp run: the job's settings from --worker_flags and the servers'
    SGD settings from --server_flags (one string, as tools/launch --worker_flags takes it)."""
    return shlex.join(settings(worker_flags, WORKER_SETTINGS) +
                      settings(server_flags, SERVER_SETTINGS))


def r2sp_flags(script_flags, server_flags):
    """The script flags of an r2sp run: `script_flags`, then the servers' SGD settings from
    --server_flags (the servers apply the script's optimizer with them)."""
    return " ".join(part for part in (script_flags, shlex.join(settings(server_flags,
                                                                        SERVER_SETTINGS)))
                    if part)


def ddp_flags_for(items):
    """--worker_flags_for values "RANK:FLAGS" with only the script's settings kept (per-worker
    pacing: 3:--emulate_ms_per_sample=8); items left with none are dropped."""
    kept = []
    for item in items:
        rank, _, text = item.partition(":")
        flags = settings(text, WORKER_SETTINGS)
        if flags:
            kept.append(f"{rank}:{shlex.join(flags)}")
    return kept


def script_command(python, script, script_flags="", ddp_hook=None, data_order="torch"):
    """The command line that runs `script` under `python` with `script_flags`: through R2SP
    (ddp_hook None: --backend=r2sp, the script's default) or under DDP (ddp_hook "none" or
    "fp16": --backend=ddp --ddp_comm_hook=HOOK, and with data_order "r2sp" --data_order=r2sp:
    the batches the R2SP configurations train)."""
    words = [python, script] + shlex.split(script_flags)
    if ddp_hook is not None:
        words += ["--backend=ddp", f"--ddp_comm_hook={ddp_hook}"]
        if data_order == "r2sp":
            words.append("--data_order=r2sp")
    return shlex.join(words)
