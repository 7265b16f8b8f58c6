// The RopeParams field table (rope_fields.h): every row round-trips through posenc's JSON
// record and is read from a config's rope dict by the types that read it (and only by them).
// The values are made per C++ type, not per field: a new row is tested with no edit here.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "field_table_support.h"
#include "posenc/error.h"
#include "posenc/rope_fields.h"
#include "posenc/rope_params_json.h"
#include "rope_dict.h"  // core/src: the rope-dict reader without validate()'s cross-field rules

namespace posenc {
namespace {

using nlohmann::json;

// A value of the member's type that differs from RopeParams' default.
template <class M>
M changed(const M& v) {
  if constexpr (std::is_same_v<M, RopeType>) {
    return RopeType::kLongRope;
  } else if constexpr (std::is_same_v<M, bool>) {
    return !v;
  } else if constexpr (std::is_same_v<M, std::vector<double>>) {
    return {1.25, 2.5};
  } else if constexpr (std::is_same_v<M, std::vector<int>>) {
    return {2, 3, 3};
  } else if constexpr (std::is_same_v<M, std::optional<double>>) {
    return 0.375;
  } else if constexpr (std::is_same_v<M, std::optional<int>> || std::is_same_v<M, std::optional<std::int64_t>>) {
    return 3000;
  } else {
    return v + 24;  // int, double
  }
}

template <class M>
json as_json(const M& v) {
  if constexpr (std::is_same_v<M, RopeType>) {
    return to_string(v);
  } else if constexpr (testing::is_optional<M>::value) {
    return *v;
  } else {
    return v;
  }
}

// RopeParams with the field at `index` changed, and that field's row.
std::pair<RopeParams, const char*> with_field_changed(int index) {
  RopeParams p;
  const char* name = nullptr;
  int i = 0;
  for_each_field(p, [&](const RopeField& row, auto& member) {
    if (i++ == index) {
      member = changed(member);
      name = row.name;
    }
  });
  return {p, name};
}

int field_count() {
  int n = 0;
  const RopeParams p;
  for_each_field(p, [&](const RopeField&, const auto&) { ++n; });
  return n;
}

TEST(RopeFields, EveryRowRoundTripsThroughTheJsonRecordUnderItsName) {
  ASSERT_GT(field_count(), 20);
  for (int i = 0; i < field_count(); ++i) {
    const auto [p, name] = with_field_changed(i);
    SCOPED_TRACE(name);
    const std::string text = rope_params_to_json(p);
    EXPECT_TRUE(json::parse(text).contains(name)) << text;
    testing::expect_same_fields(p, rope_params_from_json(text));
  }
}

TEST(RopeFields, RecordsWrittenBeforeTheTableStillLoad) {
  // posenc's record before the field table: "type" and "theta".
  const RopeParams p = rope_params_from_json(
      R"({"type": "yarn", "head_dim": 64, "partial_rotary_factor": 1.0, "theta": 500000.0, "factor": 4.0,)"
      R"("original_max_position_embeddings": 64, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": false,)"
      R"("short_factor": [], "long_factor": [], "mrope_section": [], "mrope_interleaved": false})");
  EXPECT_EQ(p.type, RopeType::kYarn);
  EXPECT_EQ(p.theta, 500000.0);
  EXPECT_FALSE(p.truncate);
  try {
    rope_params_from_json(R"({"rope_theta": 1.0, "theta": 2.0})");
    ADD_FAILURE() << "both spellings of one field loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rope.rope_theta and rope.theta"), std::string::npos) << e.what();
  }
}

TEST(RopeFields, ARecordMustNameItsType) {
  // A record is a file posenc wrote: no silent "default" for a type it does not name.
  try {
    rope_params_from_json(R"({"head_dim": 64, "rope_theta": 10000.0})");
    ADD_FAILURE() << "a record without rope_type loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rope.rope_type is required"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rope_params_from_json(R"({"type": "linear", "factor": 2.0, "head_dim": 64})").type, RopeType::kLinear);
}

// Reads one rope dict as hf_config does for a model config {} (nothing at the top level).
RopeParams read_dict(const json& dict, ModelRope& out) {
  static const json model = json::object();
  RopeParams p;
  read_rope_dict(dict, "rope_parameters", RopeDictContext{model, "", false, false, true, false, nullptr, out}, p);
  return p;
}

TEST(RopeFields, EveryRopeDictRowIsReadByTheTypesThatReadItAndOnlyBy) {
  for (int i = 0; i < field_count(); ++i) {
    const auto [changed_params, name] = with_field_changed(i);
    SCOPED_TRACE(name);
    RopeParams unchanged;
    for_each_field(changed_params, [&](const RopeField& row, const auto& member) {
      if (row.name != name) return;
      using M = std::decay_t<decltype(member)>;
      if constexpr (!std::is_same_v<M, RopeType>) {
        for (const std::string& type_name : enum_names<RopeType>()) {
          SCOPED_TRACE(type_name);
          const RopeType type = from_name<RopeType>(type_name);
          json dict = {{"rope_type", type_name}, {"factor", 2.0}};  // yarn requires the key
          if (row.name != std::string("factor")) dict[row.name] = as_json(member);
          if (row.home == FieldHome::kModelConfig) {  // not a rope-dict key: refused
            ModelRope out;
            EXPECT_THROW(read_dict(dict, out), Error);
            continue;
          }
          if (row.name == std::string("factor")) dict[row.name] = as_json(member);
          ModelRope out;
          const RopeParams got = read_dict(dict, out);
          const M& read = testing::same_member(changed_params, got, member);
          if (row.read_by.has(type)) {
            EXPECT_EQ(read, member);
          } else {
            EXPECT_EQ(read, testing::same_member(changed_params, unchanged, member));
            bool warned = false;
            for (const auto& w : out.warnings) warned = warned || w.find(std::string(name) + " is not used") != std::string::npos;
            EXPECT_TRUE(warned) << "no warning that " << type_name << " ignores " << name;
          }
        }
      }
    });
  }
}

TEST(RopeFields, TheTypeIsReadUnderHfsKeyAndItsLegacySpelling) {
  ModelRope out;
  EXPECT_EQ(read_dict({{"rope_type", "linear"}, {"factor", 2.0}}, out).type, RopeType::kLinear);
  EXPECT_EQ(read_dict({{"type", "llama3"}, {"factor", 2.0}}, out).type, RopeType::kLlama3);
  EXPECT_THROW(read_dict({{"theta", 5.0}}, out), Error);  // posenc's old record name is no HF key
}

TEST(RopeFields, TheTableCoversRopeParams) { testing::expect_table_covers(RopeParams{}); }

}  // namespace
}  // namespace posenc
