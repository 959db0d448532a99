// Scaled-dot-product attention: softmax(s, axis=-1) @ v, where the scores s come from q @ kᵀ through
// elementwise steps (scale, additive bias, masks). PDL matches the softmax chain and the second matmul;
// the variable-length path from q @ kᵀ to s is what the native constraint "attention_scores" checks
// (tinyton/analysis/attention.py), and "outline_attention" adds it to the region. Every intermediate must
// have no user outside the chain (returning the probabilities too refuses the rewrite), but for the row max and
// sum, which may also make the rows' logsumexp (`m + log(l)`, "softmax_statistics"): the kernel stores it too.
pdl.pattern @attention : benefit(3) {
  %kind = pdl.attribute = "attention"
  %axis = pdl.attribute
  %keep = pdl.attribute = unit
  %st = pdl.type
  %rt = pdl.type
  %vt = pdl.type
  %ot = pdl.type
  %s = pdl.operand : %st
  %v = pdl.operand : %vt
  %max = pdl.operation "tta.reduce_max"(%s : !pdl.value) {"axis" = %axis, "keepdims" = %keep} -> (%rt : !pdl.type)
  %m = pdl.result 0 of %max
  %sub = pdl.operation "tta.sub"(%s, %m : !pdl.value, !pdl.value) -> (%st : !pdl.type)
  %centered = pdl.result 0 of %sub
  %exp = pdl.operation "tta.exp"(%centered : !pdl.value) -> (%st : !pdl.type)
  %e = pdl.result 0 of %exp
  %sum = pdl.operation "tta.reduce_sum"(%e : !pdl.value) {"axis" = %axis, "keepdims" = %keep} -> (%rt : !pdl.type)
  %l = pdl.result 0 of %sum
  %div = pdl.operation "tta.div"(%e, %l : !pdl.value, !pdl.value) -> (%st : !pdl.type)
  %p = pdl.result 0 of %div
  %pv = pdl.operation "tta.matmul"(%p, %v : !pdl.value, !pdl.value) -> (%ot : !pdl.type)
  pdl.apply_native_constraint "used_only_by"(%s, %max, %sub : !pdl.value, !pdl.operation, !pdl.operation)
  pdl.apply_native_constraint "has_one_use"(%centered : !pdl.value)
  pdl.apply_native_constraint "used_only_by"(%e, %sum, %div : !pdl.value, !pdl.operation, !pdl.operation)
  pdl.apply_native_constraint "softmax_statistics"(%m, %l : !pdl.value, !pdl.value)
  pdl.apply_native_constraint "has_one_use"(%p : !pdl.value)
  pdl.apply_native_constraint "last_axis"(%s, %axis : !pdl.value, !pdl.attribute)
  pdl.apply_native_constraint "attention_scores"(%s : !pdl.value)
  pdl.rewrite %pv with "outline_attention"(%kind, %s : !pdl.attribute, !pdl.value)
}

// The same with the probabilities cast to v's element type before the second matmul (float8 attention as
// FlashAttention-3 runs it, spelled `p.astype(v.dtype) @ v`): the kernel casts its probability blocks so.
pdl.pattern @attention_cast_probabilities : benefit(3) {
  %kind = pdl.attribute = "attention"
  %axis = pdl.attribute
  %keep = pdl.attribute = unit
  %st = pdl.type
  %rt = pdl.type
  %vt = pdl.type
  %ot = pdl.type
  %ct = pdl.type
  %s = pdl.operand : %st
  %v = pdl.operand : %vt
  %max = pdl.operation "tta.reduce_max"(%s : !pdl.value) {"axis" = %axis, "keepdims" = %keep} -> (%rt : !pdl.type)
  %m = pdl.result 0 of %max
  %sub = pdl.operation "tta.sub"(%s, %m : !pdl.value, !pdl.value) -> (%st : !pdl.type)
  %centered = pdl.result 0 of %sub
  %exp = pdl.operation "tta.exp"(%centered : !pdl.value) -> (%st : !pdl.type)
  %e = pdl.result 0 of %exp
  %sum = pdl.operation "tta.reduce_sum"(%e : !pdl.value) {"axis" = %axis, "keepdims" = %keep} -> (%rt : !pdl.type)
  %l = pdl.result 0 of %sum
  %div = pdl.operation "tta.div"(%e, %l : !pdl.value, !pdl.value) -> (%st : !pdl.type)
  %p = pdl.result 0 of %div
  %cast = pdl.operation "tta.cast"(%p : !pdl.value) -> (%ct : !pdl.type)
  %pc = pdl.result 0 of %cast
  %pv = pdl.operation "tta.matmul"(%pc, %v : !pdl.value, !pdl.value) -> (%ot : !pdl.type)
  pdl.apply_native_constraint "used_only_by"(%s, %max, %sub : !pdl.value, !pdl.operation, !pdl.operation)
  pdl.apply_native_constraint "has_one_use"(%centered : !pdl.value)
  pdl.apply_native_constraint "used_only_by"(%e, %sum, %div : !pdl.value, !pdl.operation, !pdl.operation)
  pdl.apply_native_constraint "softmax_statistics"(%m, %l : !pdl.value, !pdl.value)
  pdl.apply_native_constraint "has_one_use"(%p : !pdl.value)
  pdl.apply_native_constraint "has_one_use"(%pc : !pdl.value)
  pdl.apply_native_constraint "element_of"(%pc, %v : !pdl.value, !pdl.value)
  pdl.apply_native_constraint "last_axis"(%s, %axis : !pdl.value, !pdl.attribute)
  pdl.apply_native_constraint "attention_scores"(%s : !pdl.value)
  pdl.rewrite %pv with "outline_attention"(%kind, %s : !pdl.attribute, !pdl.value)
}
