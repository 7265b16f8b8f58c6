// What the binary was built from, for reports that must say which source produced them.
#pragma once

#include <string>

namespace posenc::lab {

// The git commit of the source tree at build time ("<40 hex> with uncommitted changes" when the
// tree was dirty; "unknown (...)" outside a checkout). Written by cmake/build_commit.cmake.
std::string build_commit();

}  // namespace posenc::lab
