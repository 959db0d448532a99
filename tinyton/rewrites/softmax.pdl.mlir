// softmax(x) = exp(x - max(x)) / sum(exp(x - max(x))) along one axis, both reductions with keepdims.
// Sharing %axis and %keep between the two reductions makes PDL itself check "same axis, keepdims".
// Native constraints (tinyton/rewrites/patterns.py): intermediates have no users outside the chain,
// and the array fits 32-bit indexing. The rewrite outlines the matched ops into a "softmax" region.
pdl.pattern @softmax : benefit(2) {
  %kind = pdl.attribute = "softmax"
  %limit = pdl.attribute = 2147483648 : i64
  %axis = pdl.attribute
  %keep = pdl.attribute = unit
  %t = pdl.type
  %rt = pdl.type
  %x = pdl.operand : %t
  %max = pdl.operation "tta.reduce_max"(%x : !pdl.value) {"axis" = %axis, "keepdims" = %keep} -> (%rt : !pdl.type)
  %m = pdl.result 0 of %max
  %sub = pdl.operation "tta.sub"(%x, %m : !pdl.value, !pdl.value) -> (%t : !pdl.type)
  %s = pdl.result 0 of %sub
  %exp = pdl.operation "tta.exp"(%s : !pdl.value) -> (%t : !pdl.type)
  %e = pdl.result 0 of %exp
  %sum = pdl.operation "tta.reduce_sum"(%e : !pdl.value) {"axis" = %axis, "keepdims" = %keep} -> (%rt : !pdl.type)
  %d = pdl.result 0 of %sum
  %div = pdl.operation "tta.div"(%e, %d : !pdl.value, !pdl.value) -> (%t : !pdl.type)
  pdl.apply_native_constraint "has_one_use"(%m : !pdl.value)
  pdl.apply_native_constraint "has_one_use"(%s : !pdl.value)
  pdl.apply_native_constraint "used_only_by"(%e, %sum, %div : !pdl.value, !pdl.operation, !pdl.operation)
  pdl.apply_native_constraint "has_one_use"(%d : !pdl.value)
  pdl.apply_native_constraint "numel_below"(%x, %limit : !pdl.value, !pdl.attribute)
  pdl.rewrite %div with "outline_fusion"(%kind : !pdl.attribute)
}
