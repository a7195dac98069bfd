-- The scripting sandbox, run once per interpreter by server/scripting.py with the Python bridges as arguments; returns compile, run, rawget and load_library.
local redis, random, randomseed, py_unwrap, py_busy, libapi, py_load_timeout = ...
local G = _G
local dbg = debug
local type, error, tostring, select = type, error, tostring, select
local rawget, rawset, next, ipairs = rawget, rawset, next, ipairs
local setmetatable, getmetatable, setfenv = setmetatable, getmetatable, setfenv
local pcall, xpcall, loadstring, load = pcall, xpcall, loadstring, load
local INTERNAL = "=rill"
local READONLY = "Attempt to modify a readonly table"

for _, name in ipairs({"io", "os", "package", "require", "module", "dofile", "loadfile",
                       "print", "debug", "python", "getfenv", "setfenv", "newproxy"}) do
  G[name] = nil
end

-- proxy -> the table it stands for (weak: proxies die with their tables).
local real_of = setmetatable({}, {__mode = "k"})
local function deny_write() error(READONLY, 2) end

local function view(t)
  local proxy = {}
  real_of[proxy] = t
  return setmetatable(proxy, {__index = t, __newindex = deny_write, __metatable = false})
end

local function protect(t, index)
  local proxy = {}
  local mt = {__index = index or t, __newindex = deny_write}
  mt.__metatable = view(mt)
  real_of[proxy] = t
  return setmetatable(proxy, mt)
end

-- The Python bridges raise their errors as Python exceptions, which reach Lua as
-- userdata: turned back into the Redis error value wherever a script can see one.
local function unwrap(e)
  if type(e) == "userdata" then return py_unwrap(e) end
  return e, false
end

-- Written in Lua, these two never raise, so a tail call to them loses nothing.
function redis.error_reply(...)
  local e = ...
  if select("#", ...) ~= 1 or type(e) ~= "string" then
    return {err = "ERR wrong number or type of arguments"}
  end
  if e:sub(1, 1) ~= "-" then e = "-" .. e end
  local space = e:find(" ", 1, true)
  local code, msg = "ERR", e:sub(2)
  if space then code, msg = e:sub(2, space - 1), e:sub(space + 1) end
  msg = msg:gsub("^[\r\n]+", ""):gsub("[\r\n]+$", "")
  return {err = code .. " " .. msg}
end
function redis.status_reply(...)
  local s = ...
  if select("#", ...) ~= 1 or type(s) ~= "string" then
    return {err = "ERR wrong number or type of arguments"}
  end
  return {ok = s}
end
math.random, math.randomseed = random, randomseed

-- The globals scripts see ---------------------------------------------------
local ENV
-- Where names the script did not define are looked up: the whole API, or while
-- a function library's top level runs, only its `redis` (Redis swaps the
-- globals' __index the same way for FUNCTION LOAD).
local scope = G
local function missing_global(_, k)
  local v = rawget(scope, k)
  if v == nil then
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end
  return v
end

-- Redis 7's pcall hands back the message of a Redis error table, not the table.
local function pcall_result(ok, ...)
  if ok then return true, ... end
  local e = unwrap((...))
  if type(e) == "table" then
    local msg = e.err
    if type(msg) == "string" or type(msg) == "number" then e = msg end
  end
  return false, e
end
G.pcall = function(...) return pcall_result(pcall(...)) end
G.xpcall = function(f, handler)
  return xpcall(f, function(e) return handler((unwrap(e))) end)
end

G.rawset = function(t, ...)
  if real_of[t] then error(READONLY, 0) end
  return rawset(t, ...)
end
G.rawget = function(t, k) return rawget(real_of[t] or t, k) end
G.next = function(t, k) return next(real_of[t] or t, k) end
G.pairs = function(t) return G.next, t, nil end
G.ipairs = function(t) return ipairs(real_of[t] or t) end
G.setmetatable = function(t, mt)
  if real_of[t] then error(READONLY, 0) end
  return setmetatable(t, mt)
end
local function sandboxed(fn, err)
  if fn then setfenv(fn, ENV) end
  return fn, err
end
G.loadstring = function(s, name)
  -- Redis's Lua refuses binary chunks: read as source they are a syntax error.
  if type(s) == "string" and s:sub(1, 1) == "\27" then s = " " .. s end
  return sandboxed(loadstring(s, name))
end
G.load = function(f, name) return sandboxed(load(f, name)) end

G.redis = protect(redis)
for _, name in ipairs({"string", "math", "table", "coroutine", "cjson", "bit", "cmsgpack"}) do
  G[name] = protect(G[name])
end
local string_mt = getmetatable("")
string_mt.__index = G.string
string_mt.__metatable = view(string_mt)
ENV = protect(G, missing_global)
G._G = ENV

-- Redis's error handler: a table {err=..., source=..., line=...} for any error.
local function err_handler(raised)
  local err, where = unwrap(raised)
  local level = 2
  local i = dbg.getinfo(level, "nSl")
  if i and i.what == "C" then level = level + 1; i = dbg.getinfo(level, "nSl") end
  while i and i.source == INTERNAL do level = level + 1; i = dbg.getinfo(level, "nSl") end
  if where and i then err = i.short_src .. ":" .. i.currentline .. ": " .. err end
  if type(err) ~= "table" then err = {err = "ERR " .. tostring(err)} end
  if i then
    err.source = i.source
    err.line = i.currentline
  end
  return err
end

local function compile(body, chunkname)
  if body:sub(1, 1) == "\27" then body = " " .. body end
  local fn, err = loadstring(body, chunkname)
  if fn then setfenv(fn, ENV) end
  return fn, err
end

-- Every 100000 instructions: past busy-reply-threshold, answer other clients and
-- honour SCRIPT KILL. A killed script gets the error again on every line of its
-- own code (never inside ours), so a pcall in it cannot swallow the kill.
local KILLED = "Script killed by user with SCRIPT KILL..."
local function killed_hook()
  local at = dbg.getinfo(2, "S")
  if at and at.source == INTERNAL then return end
  error(KILLED, 0)
end
local function busy_hook()
  if py_busy() then
    dbg.sethook(killed_hook, "l")
    killed_hook()
  end
end

-- EVAL's scripts find KEYS and ARGV as globals; a function gets them as arguments.
local function run(fn, keys, argv, eval_mode)
  local body = fn
  if eval_mode then
    G.KEYS, G.ARGV = keys, argv
  else
    body = function() return fn(keys, argv) end
  end
  dbg.sethook(busy_hook, "", 100000)
  local ok, result = xpcall(body, err_handler)
  dbg.sethook()
  return ok, result
end

-- FUNCTION LOAD: a library's top level sees only `redis` with register_function,
-- log and the version (any other name is a missing global), and is stopped once
-- it has run past the load timeout (checked every 100000 instructions; then an
-- error on every line, as for SCRIPT KILL).
local load_library
if libapi then
  local function lib_field(_, k)
    local v = rawget(libapi, k)
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
    end
    return v
  end
  local LIB = {redis = protect(libapi, lib_field)}
  local function timeout_hook()
    local at = dbg.getinfo(2, "S")
    if at and at.source == INTERNAL then return end
    error({err = "ERR FUNCTION LOAD timeout"}, 0)
  end
  local function load_hook()
    if py_load_timeout() then
      dbg.sethook(timeout_hook, "l")
      timeout_hook()
    end
  end
  -- Redis runs the top level without an error handler: the error value itself is
  -- the message; only a bridge's luaL_error-style error wants the caller's line.
  local function load_handler(raised)
    local err, where = unwrap(raised)
    if where then
      local level = 2
      local i = dbg.getinfo(level, "Sl")
      while i and (i.what == "C" or i.source == INTERNAL) do
        level = level + 1
        i = dbg.getinfo(level, "Sl")
      end
      if i then err = i.short_src .. ":" .. i.currentline .. ": " .. err end
    end
    return err
  end
  load_library = function(fn)
    scope = LIB
    dbg.sethook(load_hook, "", 100000)
    local ok, err = xpcall(fn, load_handler)
    dbg.sethook()
    scope = G
    return ok, err
  end
end

return compile, run, rawget, load_library
