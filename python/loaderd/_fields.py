"""Extra fields and multi-label targets of a batch (loader.proto's Batch
field_data, field_ends, field_present, label_sets, label_set_ends)."""

import torch

from ._errors import ProtocolError


def fields_of(header, b, n=None):
    """{name: [bytes, or None where the sample lacks the field]} of a
    batch of n samples (default len(b.labels)), in sample order, for the
    stream's fields (header.field_names); None on a stream without any. The
    bytes are the dataset's own: a caption, a JSON document; nothing here
    decodes them."""
    names = list(header.field_names)
    if not names:
        return None
    n, nf = len(b.labels) if n is None else n, len(names)
    if len(b.field_data) != nf or len(b.field_ends) != n * nf or len(b.field_present) != n * nf:
        raise ProtocolError(f"loaderd: batch {b.seq} carries {len(b.field_data)} fields with {len(b.field_ends)} ends "
                            f"and {len(b.field_present)} flags, want {nf} fields of {n} samples")
    out = {}
    for f, name in enumerate(names):
        data, lo, vals = b.field_data[f], 0, []
        for k in range(n):
            hi = b.field_ends[f * n + k]
            if not lo <= hi <= len(data):
                raise ProtocolError(f"loaderd: batch {b.seq} field {name!r}: sample {k} ends at {hi}, "
                                    f"outside [{lo}, {len(data)}]")
            vals.append(data[lo:hi] if b.field_present[f * n + k] else None)
            lo = hi
        out[name] = vals
    return out


def targets_of(header, b, device, n=None):
    """The multi-hot targets of a multi-label stream's batch of n samples
    (default len(b.labels)): float32 [N, classes] on device, 1 at each
    class of a sample's label set (what BCEWithLogitsLoss takes); None on a
    single-label stream."""
    if not header.multi_label:
        return None
    n, classes = len(b.labels) if n is None else n, int(header.num_classes)
    ends = torch.tensor(list(b.label_set_ends), dtype=torch.int64)
    sets = torch.tensor(list(b.label_sets), dtype=torch.int64)
    if classes <= 0 or len(ends) != n or (n and int(ends[-1]) != len(sets)):
        raise ProtocolError(f"loaderd: batch {b.seq} carries {len(ends)} label sets of {len(sets)} classes "
                            f"for {n} samples over {classes} classes")
    counts = torch.diff(ends, prepend=torch.zeros(1, dtype=torch.int64))
    if len(sets) and (int(counts.min()) < 0 or int(sets.min()) < 0 or int(sets.max()) >= classes):
        raise ProtocolError(f"loaderd: batch {b.seq}'s label sets fall outside the {classes} classes")
    hot = torch.zeros(n, classes, dtype=torch.float32)
    hot[torch.repeat_interleave(torch.arange(n), counts), sets] = 1
    return hot.to(device)
