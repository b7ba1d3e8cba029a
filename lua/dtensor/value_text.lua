-- A value as error messages show it: numbers, strings, booleans and nil as they are, anything
-- else by its kind ("a table", "a userdata"), since tostring of a released tensor raises.
-- Shared by dt.optim's and dt.utils' argument checks.
return function(v)
  local t = type(v)
  if t == "number" or t == "string" or t == "boolean" or t == "nil" then return tostring(v) end
  return "a " .. t
end
