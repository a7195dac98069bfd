-- Redis's cjson library (encode/decode/config), loaded once per interpreter by server/lua_libs.py install(); called with cjson.null, returns the entry points and a protected caller.
local null = ...
local type, next, tostring, tonumber, error, pcall, select = type, next, tostring, tonumber, error, pcall, select
local ipairs = ipairs
local rawget, floor, huge = rawget, math.floor, math.huge
local format, byte, char, sub, find, gsub = string.format, string.byte, string.char, string.sub, string.find, string.gsub
local concat = table.concat

local cfg = {
  sparse_convert = false, sparse_ratio = 2, sparse_safe = 10,
  encode_max_depth = 1000, decode_max_depth = 1000,
  encode_invalid_numbers = 0,  -- 0 off, 1 on, 2 null
  decode_invalid_numbers = true,
  keep_buffer = true, precision = 14,
}

-- Failures are {msg} tables, caught by the Python entry points (see install()).
local function fail(msg) error({msg}, 0) end

-- Encoding ------------------------------------------------------------------
local ESC = {["\""] = "\\\"", ["\\"] = "\\\\", ["/"] = "\\/", ["\b"] = "\\b", ["\t"] = "\\t",
             ["\n"] = "\\n", ["\f"] = "\\f", ["\r"] = "\\r", ["\127"] = "\\u007f"}
for i = 0, 31 do
  local c = char(i)
  if not ESC[c] then ESC[c] = format("\\u%04x", i) end
end
local function quote(s)
  return "\"" .. gsub(s, "[%z\1-\31\"\\/\127]", ESC) .. "\""
end

local function number(n, what)
  if n ~= n or n == huge or n == -huge then
    local mode = cfg.encode_invalid_numbers
    if mode == 0 then fail("Cannot serialise " .. what .. ": must not be NaN or Inf") end
    if mode == 2 then return "null" end
    if n ~= n then return "nan" end
  end
  return format("%." .. cfg.precision .. "g", n)
end

local encode_value
local function array_length(t)
  local max, items = 0, 0
  for k in next, t do
    if type(k) == "number" and k ~= 0 and floor(k) == k and k >= 1 then
      if k > max then max = k end
      items = items + 1
    else
      return -1
    end
  end
  if cfg.sparse_ratio > 0 and max > items * cfg.sparse_ratio and max > cfg.sparse_safe then
    if not cfg.sparse_convert then fail("Cannot serialise table: excessively sparse array") end
    return -1
  end
  return max
end

encode_value = function(v, depth, out)
  local t = type(v)
  if t == "string" then
    out[#out + 1] = quote(v)
  elseif t == "number" then
    out[#out + 1] = number(v, "number")
  elseif t == "boolean" then
    out[#out + 1] = v and "true" or "false"
  elseif t == "nil" or v == null then
    out[#out + 1] = "null"
  elseif t == "table" then
    depth = depth + 1
    if depth > cfg.encode_max_depth then
      fail(format("Cannot serialise, excessive nesting (%d)", depth))
    end
    local len = array_length(v)
    if len > 0 then
      out[#out + 1] = "["
      for i = 1, len do
        if i > 1 then out[#out + 1] = "," end
        encode_value(rawget(v, i), depth, out)
      end
      out[#out + 1] = "]"
    else
      out[#out + 1] = "{"
      local first = true
      for k, val in next, v do
        if not first then out[#out + 1] = "," end
        first = false
        local kt = type(k)
        if kt == "number" then
          out[#out + 1] = "\"" .. number(k, "number") .. "\":"
        elseif kt == "string" then
          out[#out + 1] = quote(k) .. ":"
        else
          fail("Cannot serialise " .. kt .. ": table key must be a number or string")
        end
        encode_value(val, depth, out)
      end
      out[#out + 1] = "}"
    end
  else
    fail("Cannot serialise " .. t .. ": type not supported")
  end
end

local function encode(...)
  if select("#", ...) ~= 1 then fail("bad argument #1 to 'encode' (expected 1 argument)") end
  local out = {}
  encode_value((...), 0, out)
  return concat(out)
end

-- Decoding ------------------------------------------------------------------
-- A token is (kind, value, index): index is 0-based, as the C library reports it + 1.
local SINGLE = {["{"] = "T_OBJ_BEGIN", ["}"] = "T_OBJ_END", ["["] = "T_ARR_BEGIN", ["]"] = "T_ARR_END",
                [","] = "T_COMMA", [":"] = "T_COLON"}
local UNESC = {["\""] = "\"", ["\\"] = "\\", ["/"] = "/", b = "\b", t = "\t", n = "\n", f = "\f", r = "\r"}

local function utf8(cp)
  if cp <= 0x7F then return char(cp) end
  if cp <= 0x7FF then return char(0xC0 + floor(cp / 64), 0x80 + cp % 64) end
  if cp <= 0xFFFF then
    return char(0xE0 + floor(cp / 4096), 0x80 + floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return char(0xF0 + floor(cp / 262144), 0x80 + floor(cp / 4096) % 64, 0x80 + floor(cp / 64) % 64, 0x80 + cp % 64)
end

local function hex4(s, i)
  local h = sub(s, i, i + 3)
  if not find(h, "^%x%x%x%x$") then return nil end
  return tonumber(h, 16)
end

local function string_token(s, pos)
  -- pos is at the opening quote (1-based); returns value, next pos or nil, error, error pos
  local parts = {}
  local i = pos + 1
  while true do
    local j = find(s, "[\"\\%z]", i)
    if not j then return nil, "unexpected end of string", #s + 1 end
    parts[#parts + 1] = sub(s, i, j - 1)
    local c = sub(s, j, j)
    if c == "\"" then return concat(parts), j + 1 end
    if c == "\0" then return nil, "unexpected end of string", j end
    local e = sub(s, j + 1, j + 1)
    if e == "u" then
      local cp = hex4(s, j + 2)
      local len = 6
      if cp and cp >= 0xD800 and cp < 0xE000 then
        if cp >= 0xDC00 or sub(s, j + 6, j + 7) ~= "\\u" then cp = nil
        else
          local low = hex4(s, j + 8)
          if not low or low < 0xDC00 or low > 0xDFFF then cp = nil
          else cp = (cp - 0xD800) * 1024 + (low - 0xDC00) + 0x10000; len = 12 end
        end
      end
      if not cp then return nil, "invalid unicode escape code", j end
      parts[#parts + 1] = utf8(cp)
      i = j + len
    else
      local u = UNESC[e]
      if not u then return nil, "invalid escape code", j end
      parts[#parts + 1] = u
      i = j + 2
    end
  end
end

local NUMBER_FORMS = {
  "^[+-]?0[xX]%x+",
  "^[+-]?[iI][nN][fF][iI][nN][iI][tT][yY]", "^[+-]?[iI][nN][fF]", "^[+-]?[nN][aA][nN]",
  "^[+-]?%d+%.?%d*[eE][+-]?%d+", "^[+-]?%.%d+[eE][+-]?%d+",
  "^[+-]?%d+%.?%d*", "^[+-]?%.%d+",
}
local function invalid_number(s, i)
  local c = sub(s, i, i)
  if c == "+" then return true end
  if c == "-" then i = i + 1; c = sub(s, i, i) end
  if c == "0" then
    local c2 = sub(s, i + 1, i + 1)
    return c2 == "x" or c2 == "X" or find(c2, "^%d$") ~= nil
  elseif c ~= "" and byte(c) <= 57 then
    return false
  end
  local w = sub(s, i, i + 2):lower()
  return w == "inf" or w == "nan"
end
local function number_token(s, i)
  for _, form in ipairs(NUMBER_FORMS) do
    local a, b = find(s, form, i)
    if a then
      local text = sub(s, a, b)
      local lower = text:lower()
      local n
      if find(lower, "nan", 1, true) then
        -- 0/0 is the negative NaN on x86; strtod's "nan" is positive, "-nan" negative.
        n = 0 / 0
        if byte(text) ~= 45 then n = -n end
      elseif find(lower, "inf", 1, true) then n = (byte(text) == 45) and -huge or huge
      else n = tonumber(text) end
      if n then return n, b + 1 end
    end
  end
  return nil
end

local function next_token(s, i)
  local j = find(s, "[^ \t\r\n]", i) or #s + 1
  local c = sub(s, j, j)
  if c == "" or c == "\0" then return "T_END", nil, j end
  local single = SINGLE[c]
  if single then return single, nil, j, j + 1 end
  if c == "\"" then
    local v, nxt, errpos = string_token(s, j)
    if v == nil then return "T_ERROR", nxt, errpos end
    return "T_STRING", v, j, nxt
  end
  if c == "-" or find(c, "^%d$") then
    if not cfg.decode_invalid_numbers and invalid_number(s, j) then return "T_ERROR", "invalid number", j end
    local n, nxt = number_token(s, j)
    if n == nil then return "T_ERROR", "invalid number", j end
    return "T_NUMBER", n, j, nxt
  end
  if sub(s, j, j + 3) == "true" then return "T_BOOLEAN", true, j, j + 4 end
  if sub(s, j, j + 4) == "false" then return "T_BOOLEAN", false, j, j + 5 end
  if sub(s, j, j + 3) == "null" then return "T_NULL", null, j, j + 4 end
  if cfg.decode_invalid_numbers and invalid_number(s, j) then
    local n, nxt = number_token(s, j)
    if n == nil then return "T_ERROR", "invalid number", j end
    return "T_NUMBER", n, j, nxt
  end
  return "T_ERROR", "invalid token", j
end

local function parse_error(expected, kind, value, at)
  fail(format("Expected %s but found %s at character %d", expected, kind == "T_ERROR" and value or kind, at))
end

local decode_value
local function descend(depth, pos)
  depth = depth + 1
  if depth > cfg.decode_max_depth then
    fail(format("Found too many nested data structures (%d) at character %d", depth, pos - 1))
  end
  return depth
end

decode_value = function(s, kind, value, at, nxt, depth)
  if kind == "T_STRING" or kind == "T_NUMBER" or kind == "T_BOOLEAN" or kind == "T_NULL" then
    return value, nxt
  end
  if kind == "T_OBJ_BEGIN" then
    depth = descend(depth, nxt)
    local t = {}
    local k, v, a, n = next_token(s, nxt)
    if k == "T_OBJ_END" then return t, n end
    while true do
      if k ~= "T_STRING" then parse_error("object key string", k, v, a) end
      local key = v
      k, v, a, n = next_token(s, n)
      if k ~= "T_COLON" then parse_error("colon", k, v, a) end
      k, v, a, n = next_token(s, n)
      t[key], n = decode_value(s, k, v, a, n, depth)
      k, v, a, n = next_token(s, n)
      if k == "T_OBJ_END" then return t, n end
      if k ~= "T_COMMA" then parse_error("comma or object end", k, v, a) end
      k, v, a, n = next_token(s, n)
    end
  end
  if kind == "T_ARR_BEGIN" then
    depth = descend(depth, nxt)
    local t = {}
    local k, v, a, n = next_token(s, nxt)
    if k == "T_ARR_END" then return t, n end
    local i = 1
    while true do
      t[i], n = decode_value(s, k, v, a, n, depth)
      i = i + 1
      k, v, a, n = next_token(s, n)
      if k == "T_ARR_END" then return t, n end
      if k ~= "T_COMMA" then parse_error("comma or array end", k, v, a) end
      k, v, a, n = next_token(s, n)
    end
  end
  parse_error("value", kind, value, at)
end

local function decode_all(s)
  if #s >= 2 and (byte(s, 1) == 0 or byte(s, 2) == 0) then
    fail("JSON parser does not support UTF-16 or UTF-32")
  end
  local k, v, a, n = next_token(s, 1)
  local value
  value, n = decode_value(s, k, v, a, n, 0)
  k, v, a = next_token(s, n)
  if k ~= "T_END" then parse_error("the end", k, v, a) end
  return value
end

local function decode(...)
  if select("#", ...) ~= 1 then fail("bad argument #1 to 'decode' (expected 1 argument)") end
  local s = ...
  if type(s) == "number" then s = tostring(s) end
  if type(s) ~= "string" then
    fail("bad argument #1 to 'decode' (string expected, got " .. type(s) .. ")")
  end
  return decode_all(s)
end

-- Settings: each returns the current value(s), as the C library does ---------
local function args(n, fname, ...)
  if select("#", ...) > n then
    fail(format("bad argument #%d to '%s' (found too many arguments)", n + 1, fname))
  end
  return ...
end
local function int_option(fname, key, min, max, v)
  if v ~= nil then
    local n = tonumber(v)
    if n == nil then
      fail(format("bad argument #1 to '%s' (number expected, got %s)", fname, type(v)))
    end
    n = n >= 0 and floor(n) or -floor(-n)
    if n < min or n > max then
      fail(format("bad argument #1 to '%s' (expected integer between %d and %d)", fname, min, max))
    end
    cfg[key] = n
  end
  return cfg[key]
end
local function bool_option(fname, v, current, options)
  options = options or {"off", "on"}
  if v == nil then return current end
  if type(v) == "boolean" then return v and 1 or 0 end
  for i, name in ipairs(options) do
    if v == name then return i - 1 end
  end
  fail(format("bad argument #1 to '%s' (invalid option '%s')", fname, tostring(v)))
end
local function bool_result(n, options)
  if n == 0 or n == 1 then return n == 1 end
  return options[n + 1]
end

local INT_MAX = 2147483647
local cjson = {encode = encode, decode = decode}
function cjson.encode_max_depth(...)
  return int_option("encode_max_depth", "encode_max_depth", 1, INT_MAX, args(1, "encode_max_depth", ...))
end
function cjson.decode_max_depth(...)
  return int_option("decode_max_depth", "decode_max_depth", 1, INT_MAX, args(1, "decode_max_depth", ...))
end
function cjson.encode_number_precision(...)
  return int_option("encode_number_precision", "precision", 1, 14, args(1, "encode_number_precision", ...))
end
function cjson.encode_keep_buffer(...)
  local v = args(1, "encode_keep_buffer", ...)
  cfg.keep_buffer = bool_option("encode_keep_buffer", v, cfg.keep_buffer and 1 or 0) == 1
  return cfg.keep_buffer
end
function cjson.encode_invalid_numbers(...)
  local options = {"off", "on", "null"}
  local v = args(1, "encode_invalid_numbers", ...)
  cfg.encode_invalid_numbers = bool_option("encode_invalid_numbers", v, cfg.encode_invalid_numbers, options)
  return bool_result(cfg.encode_invalid_numbers, options)
end
function cjson.decode_invalid_numbers(...)
  local v = args(1, "decode_invalid_numbers", ...)
  cfg.decode_invalid_numbers = bool_option("decode_invalid_numbers", v, cfg.decode_invalid_numbers and 1 or 0) == 1
  return cfg.decode_invalid_numbers
end
function cjson.encode_sparse_array(...)
  local convert, ratio, safe = args(3, "encode_sparse_array", ...)
  cfg.sparse_convert = bool_option("encode_sparse_array", convert, cfg.sparse_convert and 1 or 0) == 1
  int_option("encode_sparse_array", "sparse_ratio", 0, INT_MAX, ratio)
  int_option("encode_sparse_array", "sparse_safe", 0, INT_MAX, safe)
  return cfg.sparse_convert, cfg.sparse_ratio, cfg.sparse_safe
end
-- The entry points and a protected caller for them; install() wraps each in Python.
return cjson, function(f, ...) return pcall(f, ...) end
