//===- SlapoDialect.td - the slapo dialect -----------------*- tablegen -*-===//
//
// The slapo dialect holds a model's forward computation at ATen level: tensors
// with static shapes, parameters as module-level symbols named by their full
// PyTorch path, and every op carrying its module path (the discardable
// attribute slapo.module, see ModulePath.h) and located at its Python source
// line.
//
//===----------------------------------------------------------------------===//

#ifndef SLAPO_DIALECT
#define SLAPO_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Slapo_Dialect : Dialect {
  let name = "slapo";
  let cppNamespace = "::slapo";
  let summary = "ATen-level training IR with module paths";
  let useDefaultAttributePrinterParser = 1;
  let useFoldAPI = kEmitFoldAdaptorFolder;
  let hasConstantMaterializer = 1;
}

class Slapo_Op<string mnemonic, list<Trait> traits = []>
    : Op<Slapo_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Types accepted by the ops.
//===----------------------------------------------------------------------===//

def Slapo_FloatTensor : StaticShapeTensorOf<[F16, BF16, F32, F64]>;
def Slapo_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Slapo_BoolTensor : StaticShapeTensorOf<[I1]>;
def Slapo_Tensor : StaticShapeTensorOf<[F16, BF16, F32, F64, I1, I8, I32, I64]>;

//===----------------------------------------------------------------------===//
// Enumerations.
//===----------------------------------------------------------------------===//

def Slapo_Reduction : I32EnumAttr<"Reduction", "loss reduction", [
    I32EnumAttrCase<"mean", 0>, I32EnumAttrCase<"sum", 1>,
    I32EnumAttrCase<"none", 2>]> {
  let cppNamespace = "::slapo";
  let genSpecializedAttr = 0;
}
def Slapo_ReductionAttr : EnumAttr<Slapo_Dialect, Slapo_Reduction, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

def Slapo_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu is computed", [
    I32EnumAttrCase<"erf", 0>, I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::slapo";
  let genSpecializedAttr = 0;
}
def Slapo_GeluApproximationAttr
    : EnumAttr<Slapo_Dialect, Slapo_GeluApproximation, "gelu"> {
  let assemblyFormat = "`<` $value `>`";
}

def Slapo_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "elementwise comparison", [
    I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
    I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
    I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::slapo";
  let genSpecializedAttr = 0;
}
def Slapo_ComparePredicateAttr
    : EnumAttr<Slapo_Dialect, Slapo_ComparePredicate, "cmp"> {
  let assemblyFormat = "`<` $value `>`";
}

// pp: this rank's pipeline, one rank per stage; tied: Megatron's embedding
// group, the pipeline's first and last stage, which hold copies of the
// parameters tied across stages.
def Slapo_ProcessGroup : I32EnumAttr<"ProcessGroup",
    "the ranks a collective runs over", [
    I32EnumAttrCase<"dp", 0>, I32EnumAttrCase<"tp", 1>,
    I32EnumAttrCase<"pp", 2>, I32EnumAttrCase<"tied", 3>]> {
  let cppNamespace = "::slapo";
  let genSpecializedAttr = 0;
}
def Slapo_ProcessGroupAttr
    : EnumAttr<Slapo_Dialect, Slapo_ProcessGroup, "group"> {
  let assemblyFormat = "`<` $value `>`";
}

#endif // SLAPO_DIALECT
