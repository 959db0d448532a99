// rmsnorm(x) = x * rsqrt(mean(x * x) + eps) along one axis (keepdims); eps is a scalar constant.
// The weight multiply `* w` (and any other elementwise epilogue or prologue) joins the region in
// the general fusion step of tinyton-fuse, so one pattern covers weighted and unweighted forms.
// Commutative operands are put in canonical order first (larger operand on the left), so
// `rsqrt(...) * x` and `eps + mean` match too.
pdl.pattern @rmsnorm : benefit(2) {
  %kind = pdl.attribute = "rmsnorm"
  %limit = pdl.attribute = 2147483648 : i64
  %axis = pdl.attribute
  %keep = pdl.attribute = unit
  %t = pdl.type
  %rt = pdl.type
  %st = pdl.type
  %x = pdl.operand : %t
  %square = pdl.operation "tta.mul"(%x, %x : !pdl.value, !pdl.value) -> (%t : !pdl.type)
  %sq = pdl.result 0 of %square
  %mean = pdl.operation "tta.reduce_mean"(%sq : !pdl.value) {"axis" = %axis, "keepdims" = %keep} -> (%rt : !pdl.type)
  %ms = pdl.result 0 of %mean
  %const = pdl.operation "tta.constant" -> (%st : !pdl.type)
  %eps = pdl.result 0 of %const
  %add = pdl.operation "tta.add"(%ms, %eps : !pdl.value, !pdl.value) -> (%rt : !pdl.type)
  %a = pdl.result 0 of %add
  %rsqrt = pdl.operation "tta.rsqrt"(%a : !pdl.value) -> (%rt : !pdl.type)
  %r = pdl.result 0 of %rsqrt
  %scale = pdl.operation "tta.mul"(%x, %r : !pdl.value, !pdl.value) -> (%t : !pdl.type)
  pdl.apply_native_constraint "has_one_use"(%sq : !pdl.value)
  pdl.apply_native_constraint "has_one_use"(%ms : !pdl.value)
  pdl.apply_native_constraint "has_one_use"(%a : !pdl.value)
  pdl.apply_native_constraint "has_one_use"(%r : !pdl.value)
  pdl.apply_native_constraint "numel_below"(%x, %limit : !pdl.value, !pdl.attribute)
  pdl.rewrite %scale with "outline_fusion"(%kind : !pdl.attribute)
}
