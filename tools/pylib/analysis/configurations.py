"""The names of compared configurations (tools/compare_modes): a mode, optionally a wire codec
("r2sp+fp16", "bsp+topk:0.01,fp16") that the worker checks and spells (codec_spec), and
optionally a variant of extra worker flags ("r2sp@early"); lists of them in --modes and
--codecs, and how RESULT keys and run directories spell them. "ddp" is PyTorch DDP (gloo)
running the same script, "ddp+fp16" with DDP's fp16 compression hook."""

import re

# Each compared configuration: its --sync and the scheduler flags it adds.
MODES = {
    "bsp": ("bsp", ""),
    "ssp": ("ssp", "--staleness=3"),
    "asp": ("asp", ""),
    "r2sp": ("r2sp", ""),
    "r2sp_hetero": ("r2sp", "--hetero_batching --global_batch={global_batch}"),
    # The slot's width tuned from its measured throughput (--r2sp_slot_width=auto).
    "r2sp_auto": ("r2sp", "--r2sp_slot_width=auto"),
    # Elastic averaging (docs/MODES.md): the scheduler's --elastic_period and --elastic_alpha
    # come from --scheduler_flags (defaults 4 and 0.9 / workers); "eawild+fp16" pushes fp16.
    "easgd": ("easgd", ""),
    "eawild": ("eawild", ""),
    # eawild with hetero batching: tuned batches, each difference weighted W b_i / B.
    "eawild_hetero": ("eawild", "--hetero_batching --global_batch={global_batch}"),
}

# Modes whose workers run the optimizer themselves: they get the servers' SGD flags.
ELASTIC = ("easgd", "eawild")

# PyTorch DDP (not an R2SP mode): the same PyTorch script under DistributedDataParallel, gloo.
DDP = "ddp"
# Its only codec: DDP's fp16 compression communication hook (fp16_compress_hook).
DDP_CODECS = ("fp16",)


# Wire codecs a compared configuration may name after its mode ("r2sp+fp16", "bsp+topk:0.01"):
# any worker --push_codec, checked and spelt by the worker itself (codec_spec.WorkerCodecParser,
# passed in as `parse_codec`). fp16 also pulls in fp16 during training, the others pull fp32;
# no suffix is fp32. Lists of them only need to know which codecs take options after a comma.
_SPARSE = ("topk", "csc")
_CODEC_OPTION = re.compile(r"fp16|exact|chunk=.*")


_VARIANT = re.compile(r"[A-Za-z0-9_-]+")


def split_variant(name):
    """(configuration, variant or None) of a name that may end in @VARIANT ("r2sp@early",
    "bsp+fp16@early"): a variant adds the worker flags compare_modes' --variant gives it.
    ValueError for a variant name that is not letters, digits, '_' or '-'."""
    base, at, variant = name.partition("@")
    if at and not _VARIANT.fullmatch(variant):
        raise ValueError(f"bad variant name {variant!r} in {name!r} (letters, digits, _ and -)")
    return base, (variant if at else None)


def parse_variant(text, option="--variant"):
    """(name, flags) of a compare_modes --variant=NAME=FLAGS value (or `option`'s:
    --scheduler_variant, --server_variant); ValueError if it is not NAME=FLAGS with NAME of
    letters, digits, '_' and '-'."""
    name, eq, flags = text.partition("=")
    if not eq or not _VARIANT.fullmatch(name):
        raise ValueError(f"{option}={text}: want NAME=FLAGS, NAME of letters, digits, _ and -")
    return name, flags


def split_mode(name):
    """(mode, codec or None) of a configuration name such as "r2sp+fp16" or "bsp+topk:0.01"
    (the codec as the name spells it: split_modes spelt it canonically); ValueError for an
    unknown mode."""
    mode, _, codec = name.partition("+")
    if mode not in MODES and mode != DDP:
        raise ValueError(f"unknown mode {mode}")
    return mode, codec or None


def is_ddp(name):
    """Whether configuration `name` ("ddp", "ddp+fp16@x") runs PyTorch DDP rather than R2SP."""
    return split_mode(split_variant(name)[0])[0] == DDP


def _ddp_codec(codec):
    """ddp's codec as spelt ("fp16"); ValueError for any other (DDP has one compression hook
    here, not the worker's codecs)."""
    if codec.strip().lower() not in DDP_CODECS:
        raise ValueError(f"ddp+{codec}: DDP takes +fp16 only (its fp16 compression hook); the "
                         "worker's other codecs are R2SP's")
    return codec.strip().lower()


def _sparse(codec):
    return codec.split(":")[0].strip().lower() in _SPARSE


def split_modes(text, parse_codec):
    """The configuration names in a --modes value: separated by commas, or by semicolons when
    it has any. A sparse codec's own options stay with it: "bsp,r2sp+topk:0.01,fp16,asp" is bsp,
    r2sp+topk:0.01,fp16 and asp. Each codec is spelt as parse_codec (the worker) gives it.
    ValueError for an unknown mode or a codec parse_codec refuses."""
    names = []
    for item in _split_list(text, lambda name: _sparse(name.partition("+")[2])):
        base, variant = split_variant(item)
        mode, codec = split_mode(base)
        spell = _ddp_codec if mode == DDP else parse_codec
        names.append((mode if codec is None else f"{mode}+{spell(codec)}") +
                     (f"@{variant}" if variant else ""))
    return names


def split_codecs(text, parse_codec):
    """The codecs in a --codecs value, as parse_codec (the worker) gives them: separated by
    commas, or by semicolons when it has any. After a sparse codec, "exact" and "chunk=N" are its options;
    "fp16" there could be either, so it is refused (say "topk:0.01,fp16;fp16" with semicolons).
    ValueError for an unknown or ambiguous codec."""
    def ambiguous(codec, item):
        if item.lower() == "fp16":
            raise ValueError(f"--codecs={text}: is fp16 after {codec} its value encoding "
                             "or a codec of its own? Separate the codecs with ';' instead "
                             f"(e.g. {codec},fp16;fp16)")
    return [parse_codec(c) for c in _split_list(text, _sparse, ambiguous)]


def _split_list(text, takes_options, check=None):
    """The items of a --modes or --codecs value: separated by semicolons when it has any, else
    by commas, where an item that reads as a sparse codec's option (fp16, exact, chunk=N) joins
    the item before it if takes_options(that item). check(previous, option), if given, may
    refuse such an option with ValueError."""
    if ";" in text:
        return text.split(";")
    items = []
    for item in text.split(","):
        if items and takes_options(items[-1]) and _CODEC_OPTION.fullmatch(item.lower()):
            if check is not None:
                check(items[-1], item)
            items[-1] += "," + item
        else:
            items.append(item)
    return items


def mode_codec_names(modes, codecs):
    """Every mode with every codec, mode by mode ("bsp", "bsp+fp16", "r2sp", ...); fp32 is the
    plain mode. A mode's @VARIANT stays last ("r2sp@early+fp16" is spelt r2sp+fp16@early).
    ddp takes only fp32 and fp16 of them (its one compression hook)."""
    names = []
    for mode in modes:
        base, variant = split_variant(mode)
        suffix = f"@{variant}" if variant else ""
        names += [base + suffix if codec == "fp32" else f"{base}+{codec}{suffix}"
                  for codec in codecs if base != DDP or codec in ("fp32",) + DDP_CODECS]
    return names


def result_key(name):
    """A configuration name as RESULT keys and run directories spell it: a codec's ':', ',' and
    '=' read '_' (r2sp+csc:0.05,chunk=4096 -> r2sp+csc_0.05_chunk_4096), so that a RESULT
    key=value splits at its one '=' and a path holds no ':'."""
    return re.sub(r"[:,=]", "_", name)
