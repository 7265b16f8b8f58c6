// A position remap from the dict posenc/attention.py's _remap_fields builds (keys remap,
// remap_window, remap_group, remap_leak, remap_chunk_size, remap_local_size): read in one place
// for posenc.golden (posenc.attention passes the same fields to torch.ops.posenc.attention). A missing or unreadable key is a posenc::Error naming it.
#pragma once

#include <pybind11/pybind11.h>

#include "posenc/attention.h"

namespace posenc {

PositionRemap remap_of(const pybind11::dict& fields);

}  // namespace posenc
