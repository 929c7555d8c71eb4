"""The names of compared configurations (tools/compare_modes): a mode, optionally a wire codec
("r2sp+fp16", "bsp+topk:0.01,fp16") checked as the worker checks its --push_codec, and
optionally a variant of extra worker flags ("r2sp@early"); lists of them in --modes and
--codecs, and how RESULT keys and run directories spell them."""

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
}


# Wire codecs a compared configuration may name after its mode ("r2sp+fp16", "bsp+topk:0.01"):
# any worker --push_codec, checked as common/codec/codec_spec.cc's ParseCodecSpec does. fp16
# also pulls in fp16 during training, the others pull fp32; no suffix is fp32.
CODEC_FORMS = "fp32, fp16, topk:RATIO[,fp16][,exact] or csc:RATIO[,fp16][,chunk=N]"
MAX_CHUNK_ELEMENTS = 1 << 22  # codec_spec.cc's kMaxChunkElements
# The numbers absl::SimpleAtod reads (no inf or nan: never a ratio), decimal or hexadecimal.
_DECIMAL = re.compile(r"\+?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_HEX = re.compile(r"\+?0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)([pP][+-]?\d+)?")
_CODEC_OPTION = re.compile(r"fp16|exact|chunk=.*")


def parse_codec(text):
    """The worker --push_codec value `text` as this tool passes it on: in lower case (as the
    worker reads it) and without the spaces the worker ignores; ValueError, saying why, if the
    worker would refuse it."""
    codec = text.strip().lower()
    if codec in ("fp32", "fp16"):
        return codec
    head, *options = codec.split(",")
    kind, colon, ratio = head.partition(":")
    if not colon or kind not in ("topk", "csc"):
        raise ValueError(f"unknown codec {text!r} (want {CODEC_FORMS})")
    ratio = ratio.strip()
    value = (float(ratio) if _DECIMAL.fullmatch(ratio) else
             float.fromhex(ratio) if _HEX.fullmatch(ratio) else None)
    if value is None or not 0.0 < value <= 1.0:
        raise ValueError(f"codec {text!r}: the ratio must be a number in (0, 1]")
    parts = [f"{kind}:{ratio}"]
    for option in options:
        if option == "fp16" or (option == "exact" and kind == "topk"):
            parts.append(option)
        elif option.startswith("chunk=") and kind == "csc":
            chunk = option[len("chunk="):].strip()
            if not re.fullmatch(r"\+?\d+", chunk) or not 1 <= int(chunk) <= MAX_CHUNK_ELEMENTS:
                raise ValueError(f"codec {text!r}: chunk must be an integer in "
                                 f"[1, {MAX_CHUNK_ELEMENTS}]")
            parts.append(f"chunk={chunk}")
        else:
            raise ValueError(f"codec {text!r}: unknown option {option!r} (want {CODEC_FORMS})")
    return ",".join(parts)


_VARIANT = re.compile(r"[A-Za-z0-9_-]+")


def split_variant(name):
    """(configuration, variant or None) of a name that may end in @VARIANT ("r2sp@early",
    "bsp+fp16@early"): a variant adds the worker flags compare_modes' --variant gives it.
    ValueError for a variant name that is not letters, digits, '_' or '-'."""
    base, at, variant = name.partition("@")
    if at and not _VARIANT.fullmatch(variant):
        raise ValueError(f"bad variant name {variant!r} in {name!r} (letters, digits, _ and -)")
    return base, (variant if at else None)


def parse_variant(text):
    """(name, worker flags) of a compare_modes --variant=NAME=FLAGS value; ValueError if it is
    not NAME=FLAGS with NAME of letters, digits, '_' and '-'."""
    name, eq, flags = text.partition("=")
    if not eq or not _VARIANT.fullmatch(name):
        raise ValueError(f"--variant={text}: want NAME=FLAGS, NAME of letters, digits, _ and -")
    return name, flags


def split_mode(name):
    """(mode, codec or None) of a configuration name such as "r2sp+fp16" or "bsp+topk:0.01"
    (the codec as parse_codec gives it); ValueError if either part is unknown."""
    mode, _, codec = name.partition("+")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode}")
    return mode, parse_codec(codec) if codec else None


def _sparse(codec):
    return codec.split(":")[0].strip().lower() in ("topk", "csc")


def split_modes(text):
    """The configuration names in a --modes value: separated by commas, or by semicolons when
    it has any. A sparse codec's own options stay with it: "bsp,r2sp+topk:0.01,fp16,asp" is bsp,
    r2sp+topk:0.01,fp16 and asp. Each codec is spelt as parse_codec gives it. ValueError for an
    unknown name."""
    names = []
    for item in _split_list(text, lambda name: _sparse(name.partition("+")[2])):
        base, variant = split_variant(item)
        mode, codec = split_mode(base)
        names.append((mode if codec is None else f"{mode}+{codec}") +
                     (f"@{variant}" if variant else ""))
    return names


def split_codecs(text):
    """The codecs in a --codecs value, as parse_codec gives them: separated by commas, or by
    semicolons when it has any. After a sparse codec, "exact" and "chunk=N" are its options;
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
    plain mode. A mode's @VARIANT stays last ("r2sp@early+fp16" is spelt r2sp+fp16@early)."""
    names = []
    for mode in modes:
        base, variant = split_variant(mode)
        suffix = f"@{variant}" if variant else ""
        names += [base + suffix if codec == "fp32" else f"{base}+{codec}{suffix}"
                  for codec in codecs]
    return names


def result_key(name):
    """A configuration name as RESULT keys and run directories spell it: a codec's ':', ',' and
    '=' read '_' (r2sp+csc:0.05,chunk=4096 -> r2sp+csc_0.05_chunk_4096), so that a RESULT
    key=value splits at its one '=' and a path holds no ':'."""
    return re.sub(r"[:,=]", "_", name)
