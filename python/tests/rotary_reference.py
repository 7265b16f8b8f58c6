"""Double-precision references the rotary-variant tests share, written from the papers and the
reference libraries, not from posenc: a rotation of x [..., D] by per-pair angles, scaled."""
import torch


def rotate_pairs(x, angles, layout, scale=None):
    """x [..., D] (float64) rotated by angles [..., P] broadcasting to x's pairs, cos and sin times
    scale (xPos) where given. interleaved: pair j = channels (2j, 2j + 1), rotary-embedding-torch's
    and torchscale's rotate_every_two; half_split: (j, j + P), HF's rotate_half. Channels past 2P
    pass through."""
    pairs = angles.shape[-1]
    c, s = angles.cos(), angles.sin()
    if scale is not None:
        c, s = c * scale, s * scale
    rot, rest = x[..., : 2 * pairs], x[..., 2 * pairs:]
    if layout == "interleaved":
        full_c, full_s = c.repeat_interleave(2, -1), s.repeat_interleave(2, -1)
        a, b = rot[..., 0::2], rot[..., 1::2]
        turned = torch.stack((-b, a), -1).flatten(-2)
    else:
        full_c, full_s = torch.cat((c, c), -1), torch.cat((s, s), -1)
        a, b = rot[..., :pairs], rot[..., pairs:]
        turned = torch.cat((-b, a), -1)
    return torch.cat((rot * full_c + turned * full_s, rest), -1)
