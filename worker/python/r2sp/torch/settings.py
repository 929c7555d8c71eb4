"""r2sp.torch.init()'s settings: the environment tools/launch or torchrun set, the script's
flags and keyword settings, assembled into the worker's options (a dict of option name ->
value, named as the C++ worker's flags) that `_core.Worker` takes and checks, and the rank and
world size torchrun's RANK and WORLD_SIZE give before the job is joined. Pure functions of their
inputs; state.py keeps the result."""

import dataclasses
import shlex

# The worker binary's flags about its own model and data set (r2sp._core.model_option_names()),
# which the launchers may pass to every worker: the script owns its model and data, so they are
# accepted and left out of the worker's options.
IGNORED_FLAGS = frozenset([
    "augment", "compute_ms", "data", "data_dir", "device", "encode_on_device", "eval_only", "gpu",
    "grad", "init", "iterations", "keep_models", "layers", "model", "model_dir", "model_mb",
    "print_codec", "threads", "workers_per_process"])

SCHEDULER_HELP = ("set R2SP_SCHEDULER=tcp://HOST:PORT (tools/launch does), or MASTER_ADDR and "
                  "MASTER_PORT (torchrun's), or call r2sp.torch.init(scheduler='tcp://HOST:PORT')")


@dataclasses.dataclass(frozen=True)
class Settings:
    """What init() resolved.

    flags: the C++ worker's flags, one per setting ("--name=value"), in the order first given.
    options: the same as the worker's options: {name: value}, a flag's value as its text
      ("--name" is True, "--noname" False), a keyword setting's as given (64, 0.5, True).
    local_rank: this worker's index among the workers on its host (LOCAL_RANK, else 0).
    seed: the job's --seed (1 unless given): the sampler's shuffles.
    data_dir: R2SP_DATA_DIR or --data_dir, the data set's directory ("" if none).
    rank: the rank this worker asks the scheduler for (RANK, or --rank), which it gets when it
      joins the job at its start; None: the scheduler chooses.
    world_size: the number of workers WORLD_SIZE says the job has; None if unset."""
    flags: tuple
    options: dict
    local_rank: int
    seed: int
    data_dir: str
    rank: object = None
    world_size: object = None

    def flag(self, name, default=None):
        """The value of --name in flags (a string), or `default`."""
        prefix = f"--{name}="
        for f in self.flags:
            if f.startswith(prefix):
                return f[len(prefix):]
            if f == f"--{name}":
                return "true"
        return default


def flag_option(flag):
    """(name, value) of a well-formed flag: '--name=value' -> ('name', 'value'), '--name' ->
    ('name', True), '--noname' -> ('name', False) (gflags' negation of a boolean)."""
    name, eq, value = flag[2:].partition("=")
    if eq:
        return name, value
    if name.startswith("no") and len(name) > 2:
        return name[2:], False
    return name, True


def split_flag(flag, source):
    """('name', '--name=value' normalised) of one flag; ValueError naming `source` otherwise."""
    if not isinstance(flag, str):
        raise TypeError(f"r2sp.torch.init: {source} holds {flag!r} of type {type(flag).__name__}; "
                        "flags are strings such as '--batch_size=64'")
    if not flag.startswith("--") or len(flag) < 3 or flag[2] in "-=":
        raise ValueError(f"r2sp.torch.init: {source} holds {flag!r}, not a flag; flags are "
                         "written '--name=value' or '--name'")
    name = flag[2:].split("=", 1)[0]
    return name, flag


def setting_flag(name, value):
    """The flag of a keyword setting: batch_size=64 -> --batch_size=64, True -> --name,
    False -> --noname (gflags' negation)."""
    if not name.isidentifier():
        raise ValueError(f"r2sp.torch.init: {name!r} is not a flag name")
    if isinstance(value, bool):
        return f"--{name}" if value else f"--no{name}"
    if isinstance(value, (int, float, str)):
        return f"--{name}={value}"
    raise TypeError(f"r2sp.torch.init: setting {name}={value!r} is a {type(value).__name__}; "
                    "settings are numbers, strings or booleans")


def scheduler_from_env(env):
    """R2SP_SCHEDULER, else tcp://MASTER_ADDR:MASTER_PORT, else None."""
    if env.get("R2SP_SCHEDULER"):
        return env["R2SP_SCHEDULER"]
    addr, port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
    if addr and port:
        if not port.isdigit():
            raise ValueError(f"r2sp.torch.init: MASTER_PORT={port!r} is not a port number")
        return f"tcp://{addr}:{port}"
    if addr or port:
        missing = "MASTER_PORT" if addr else "MASTER_ADDR"
        raise ValueError(f"r2sp.torch.init: {missing} is not set (torchrun sets MASTER_ADDR and "
                         f"MASTER_PORT together); {SCHEDULER_HELP}")
    return None


def env_flags(env):
    """The flags in R2SP_WORKER_FLAGS (shell-quoted)."""
    text = env.get("R2SP_WORKER_FLAGS", "")
    try:
        return shlex.split(text)
    except ValueError as e:
        raise ValueError(f"r2sp.torch.init: R2SP_WORKER_FLAGS cannot be parsed ({e}): {text!r}")


def int_env(env, name, default):
    value = env.get(name, "")
    if value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"r2sp.torch.init: {name}={value!r} is not an integer") from None


def rank_env(env):
    """(RANK, WORLD_SIZE) of `env`, each an int or None when unset; ValueError naming the
    variable unless RANK >= 0, WORLD_SIZE >= 1 and, when both are set, RANK < WORLD_SIZE."""
    rank = int_env(env, "RANK", None)
    world_size = int_env(env, "WORLD_SIZE", None)
    if rank is not None and rank < 0:
        raise ValueError(f"r2sp.torch.init: RANK={rank} is negative; RANK is this worker's index "
                         "in the job, from 0")
    if world_size is not None and world_size < 1:
        raise ValueError(f"r2sp.torch.init: WORLD_SIZE={world_size} is not a number of workers "
                         "(1 or more)")
    if rank is not None and world_size is not None and rank >= world_size:
        raise ValueError(f"r2sp.torch.init: RANK={rank} is not below WORLD_SIZE={world_size} "
                         f"(the ranks are 0 to {world_size - 1})")
    return rank, world_size


def asked_rank(value, world_size):
    """The rank the option value of --rank asks for (None for -1: the scheduler chooses);
    ValueError unless it is an integer from -1 and, with WORLD_SIZE set, below it."""
    try:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ValueError
        rank = int(value)
    except ValueError:
        raise ValueError(f"r2sp.torch.init: --rank={value!r} is not an integer") from None
    if rank < -1:
        raise ValueError(f"r2sp.torch.init: --rank={rank} is not a rank (-1: the scheduler "
                         "chooses)")
    if world_size is not None and rank >= world_size:
        raise ValueError(f"r2sp.torch.init: --rank={rank} is not below WORLD_SIZE={world_size} "
                         f"(the ranks are 0 to {world_size - 1})")
    return None if rank == -1 else rank


def resolve(env, flags=None, settings=None):
    """Settings from the environment `env` (a mapping), then `flags` (a list of '--name=value'
    strings), then keyword `settings` (a dict); a later value of a flag replaces an earlier one.
    RANK, when set, is the first value of --rank (the rank the worker asks the scheduler for).

    ValueError/TypeError with what to do for a malformed flag, setting or variable (RANK and
    WORLD_SIZE included), and for a job with no scheduler address."""
    if flags is not None and (isinstance(flags, str) or not hasattr(flags, "__iter__")):
        raise TypeError("r2sp.torch.init: flags is a list of strings such as ['--epochs=2'], "
                        f"not {type(flags).__name__}")
    ordered, values = {}, {}
    scheduler = scheduler_from_env(env)
    if scheduler:
        ordered["scheduler"] = "--scheduler=" + scheduler
        values["scheduler"] = scheduler
    env_rank, world_size = rank_env(env)
    if env_rank is not None:
        ordered["rank"] = f"--rank={env_rank}"
        values["rank"] = env_rank
    sources = [(f, "R2SP_WORKER_FLAGS", None) for f in env_flags(env)]
    sources += [(f, "flags", None) for f in (flags or [])]
    sources += [(setting_flag(k, v), f"setting {k}", (k, v)) for k, v in (settings or {}).items()]
    for flag, source, typed in sources:
        name, flag = split_flag(flag, source)
        option, value = typed if typed is not None else flag_option(flag)
        for key in {name, option, "no" + option}:  # the last value (either form) counts
            ordered.pop(key, None)
            values.pop(key, None)
        ordered[name] = flag
        values[option] = value
    if "scheduler" not in ordered:
        raise ValueError("r2sp.torch.init: no scheduler address; " + SCHEDULER_HELP)
    data_dir = env.get("R2SP_DATA_DIR", "")
    if "data_dir" in ordered:
        data_dir = ordered["data_dir"].partition("=")[2]
    kept = tuple(f for name, f in ordered.items() if name not in IGNORED_FLAGS)
    options = {name: v for name, v in values.items() if name not in IGNORED_FLAGS}
    seed_text = ordered.get("seed", "--seed=1").partition("=")[2]
    try:
        seed = int(seed_text)
    except ValueError:
        raise ValueError(f"r2sp.torch.init: --seed={seed_text!r} is not an integer") from None
    rank = asked_rank(values["rank"], world_size) if "rank" in values else None
    return Settings(flags=kept, options=options, local_rank=int_env(env, "LOCAL_RANK", 0), seed=seed,
                    data_dir=data_dir, rank=rank, world_size=world_size)
