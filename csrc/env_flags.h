// The library's on/off environment switches (VECGEMM_AUTOTUNE, VECGEMM_DEPENDENT_LAUNCH):
// 1/0, true/false, on/off, yes/no in any case. Anything else keeps the default, with a
// warning that names the variable and the values it takes.
#pragma once
#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

namespace vecgemm {

inline bool env_flag(const char* name, bool fallback) {
  const char* raw = std::getenv(name);
  if (raw == nullptr) return fallback;
  std::string v(raw);
  v.erase(std::remove_if(v.begin(), v.end(), [](unsigned char c) { return std::isspace(c); }), v.end());
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  TORCH_WARN(name, "='", raw, "' is not a switch value (1/0, true/false, on/off, yes/no); using the default, ",
             fallback ? "on" : "off");
  return fallback;
}

}  // namespace vecgemm
