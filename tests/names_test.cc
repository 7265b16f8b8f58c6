// names.h: every named enum's table is sound (each name reads back to its value, no value
// without a name), found through the registry POSENC_ENUM_NAMES fills, checked against the enums
// the headers declare.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "posenc/alibi.h"
#include "posenc/attention.h"
#include "posenc/axial_rope.h"
#include "posenc/distance_bias.h"
#include "posenc/kerple.h"
#include "posenc/error.h"
#include "posenc/half.h"
#include "posenc/model_families.h"
#include "posenc/model_spec.h"
#include "posenc/numerics.h"
#include "posenc/rope_apply.h"
#include "posenc/rope_type.h"
#include "posenc/schemes.h"
#include "posenc/sinusoidal.h"
#include "posenc_torch/model_config.h"  // torch_layer::Fusion's names: a torch-free header
#include "posenc_lab/run_settings.h"     // lab::RopeExtension's names: a torch-free header
#include "posenc_lab/vision.h"           // lab::VisionScheme's names: a torch-free header

namespace posenc {

// Two broken tables for the check itself: a name shared by two values, and a value without one.
enum class ClashingForTest { kA, kB };
POSENC_ENUM_NAMES(ClashingForTest, "clashing", {ClashingForTest::kA, "a"}, {ClashingForTest::kA, "b"},
                  {ClashingForTest::kB, "b"});
enum class GappedForTest { kA, kB, kC };
POSENC_ENUM_NAMES(GappedForTest, "gapped", {GappedForTest::kA, "a"}, {GappedForTest::kC, "c"});

namespace {

// The enums POSENC_ENUM_NAMES declares in the project's headers, read from the sources: the
// registry (names.h) must hold each of them, so a new enum cannot be left out of the check.
std::set<std::string> enums_declared_in_headers() {
  const std::string root = std::string(POSENC_EXAMPLES_DIR) + "/..";
  std::set<std::string> out;
  const std::regex declared(R"(^POSENC_ENUM_NAMES\(([A-Za-z_:]+),)");
  for (const char* dir : {"core/include", "torch/include", "lab/include", "plot/include", "bench/include"}) {
    if (!std::filesystem::exists(root + "/" + dir)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root + "/" + dir)) {
      if (entry.path().extension() != ".h") continue;
      std::ifstream in(entry.path());
      std::string line;
      std::smatch m;
      while (std::getline(in, line))
        if (std::regex_search(line, m, declared)) out.insert(m[1]);
    }
  }
  return out;
}

TEST(Names, EveryNamedEnumRoundTrips) {
  const std::set<std::string> declared = enums_declared_in_headers();
  std::set<std::string> registered;
  for (const NamedEnum& e : named_enums()) {
    if (!declared.count(e.type)) continue;  // this file's own broken tables (below)
    registered.insert(e.type);
    EXPECT_EQ(e.check(), "") << e.type << " (" << e.what << ")";
  }
  EXPECT_GE(declared.size(), 12u) << "the header scan finds the enums (DType, RopeType, ... torch_layer::Fusion)";
  for (const auto& type : declared)
    EXPECT_EQ(registered.count(type), 1u) << type << " has POSENC_ENUM_NAMES but is not checked: include its header here";
}

TEST(Names, CheckFindsANameThatDoesNotReadBack) {
  EXPECT_EQ(check_enum_names<ClashingForTest>(), "'b' reads back to another value; ");
  EXPECT_EQ(check_enum_names<GappedForTest>(), "values 0..2 have 2 names, a gap; ");
}

TEST(Names, HalfSplitIsSpelledOneWayAndOlderSpellingsStillRead) {
  EXPECT_STREQ(to_string(RopeLayout::kHalfSplit), "half_split");
  EXPECT_STREQ(to_string(SinusoidalLayout::kHalves), "half_split");
  EXPECT_EQ(from_name<RopeLayout>("half"), RopeLayout::kHalfSplit);
  EXPECT_EQ(from_name<SinusoidalLayout>("halves"), SinusoidalLayout::kHalves);
}

TEST(Names, OlderRopeTypeSpellingsAreAliases) {
  EXPECT_EQ(from_name<RopeType>("mrope"), RopeType::kDefault);  // Qwen2-VL
  EXPECT_EQ(from_name<RopeType>("su"), RopeType::kLongRope);    // early Phi-3
  EXPECT_STREQ(to_string(RopeType::kLongRope), "longrope");
  EXPECT_EQ(enum_names_joined<RopeType>().find("su"), std::string::npos);
}

TEST(Names, PRopeIsProportionalsAliasAndHelpListsAliases) {
  EXPECT_EQ(from_name<RopeType>("p-rope"), RopeType::kProportional);  // Barbero et al. 2024
  EXPECT_STREQ(to_string(RopeType::kProportional), "proportional");
  EXPECT_EQ(enum_aliases_joined<RopeType>(), "mrope = default, su = longrope, p-rope = proportional");
  EXPECT_EQ(enum_aliases_joined<DType>(), "");
}

TEST(Names, AnUnknownNameIsAnErrorNamingItAndTheChoices) {
  try {
    from_name<DType>("f64");
    FAIL() << "f64 is not a dtype";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "dtype must be one of f32|bf16|f16, got 'f64'");
  }
}

}  // namespace
}  // namespace posenc
