"""Wire codecs as byte ratios against fp32 (docs/ARCHITECTURE.md, the wire codecs): fp16 halves a
message, top-k keeps a fraction k of the values with a 4-byte index each."""


def byte_ratio(codec):
    """Bytes on the wire per fp32 byte for `codec` (fp32, fp16, topk:K with 0 < K <= 1)."""
    if codec == "fp32":
        return 1.0
    if codec == "fp16":
        return 0.5
    if codec.startswith("topk:"):
        try:
            k = float(codec[len("topk:"):])
        except ValueError:
            k = -1.0
        if 0 < k <= 1:
            return 2.0 * k
    raise ValueError(f"unknown codec {codec!r}: use fp32, fp16 or topk:K with 0 < K <= 1")
