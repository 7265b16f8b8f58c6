#include "config_doc.h"

#include "config_text.h"
#include "json_fields.h"
#include "posenc/error.h"

namespace posenc {

namespace jf = json_fields;

ConfigDoc::ConfigDoc(const std::string& json_text) {
  config_text::check_nesting(json_text);
  try {
    top_ = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {  // parse errors, and numbers beyond double (1e705)
    throw Error(std::string("config is not valid JSON: ") + e.what());
  }
  if (!top_.is_object()) throw Error("config must be a JSON object at the top level, got " + jf::describe(top_));
  const nlohmann::json* text = jf::object(top_, "text_config", "");
  where_ = text ? "text_config" : "";
  // Qwen2.5-Omni: the text model is the thinker's (Qwen2_5OmniConfig.get_text_config).
  if (!text)
    if (const nlohmann::json* thinker = jf::object(top_, "thinker_config", ""))
      if ((text = jf::object(*thinker, "text_config", "thinker_config"))) where_ = "thinker_config.text_config";
  model_ = text ? text : &top_;
  families_ = "|";
  if (auto mt = jf::string(top_, "model_type", "")) {
    model_type_ = *mt;
    families_ += *mt + "|";
  }
  if (text)
    if (auto mt = jf::string(*text, "model_type", where_)) families_ += *mt + "|";
  family_ = find_family_of(families_);
}

std::string ConfigDoc::at(const std::string& key) const { return jf::path(where_, key); }

const nlohmann::json* ConfigDoc::vision_config() const {
  if (const nlohmann::json* v = jf::object(top_, "vision_config", "")) return v;
  const nlohmann::json* thinker = jf::object(top_, "thinker_config", "");
  return thinker ? jf::object(*thinker, "vision_config", "thinker_config") : nullptr;
}

const FamilyQuirks& ConfigDoc::quirks() const {
  static const FamilyQuirks kGeneric{};
  return family_ ? *family_ : kGeneric;
}

}  // namespace posenc
