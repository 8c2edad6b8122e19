// Parameter names are arbitrary strings (full dotted PyTorch paths, but any
// state_dict key is legal). Quotes, backslashes, newlines, comment closers and
// non-ASCII UTF-8 must survive printing and parsing byte for byte, in the
// symbol, in get_param's reference and in the aliases.

// RUN: slapo-opt %s | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | slapo-opt | FileCheck %s
// RUN: slapo-opt %s --mlir-print-op-generic | slapo-opt --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Printing is a fixed point: printing the printed form again changes nothing.
// RUN: slapo-opt %s > %t.once
// RUN: slapo-opt %t.once > %t.twice
// RUN: diff %t.once %t.twice
// RUN: slapo-opt %s --mlir-print-op-generic | slapo-opt > %t.generic
// RUN: diff %t.once %t.generic

// CHECK:      slapo.param @"a\22b\0Ac*/\C3\A9" : tensor<4xf32> {aliases = ["x\22y\0Az*/\C3\A9", "back\\slash\\alias", "tab\09end"]}
// CHECK-NEXT: slapo.param @"back\\slash" : tensor<4xf32>
// CHECK-NEXT: slapo.param @"caf\C3\A9.\E2\82\AC" : tensor<4xf32>
// CHECK-NEXT: slapo.param buffer @"/*c*/ \22quoted\22" : tensor<2xi1>
// CHECK-NEXT: slapo.param @"0.layers.1.w" : tensor<4xf32>
// CHECK-NEXT: slapo.param @"with space" : tensor<4xf32>
// GENERIC:      "slapo.param"() {aliases = ["x\22y\0Az*/\C3\A9", "back\\slash\\alias", "tab\09end"], sym_name = "a\22b\0Ac*/\C3\A9", type = tensor<4xf32>} : () -> ()
// GENERIC-NEXT: "slapo.param"() {sym_name = "back\\slash", type = tensor<4xf32>} : () -> ()
// GENERIC-NEXT: "slapo.param"() {sym_name = "caf\C3\A9.\E2\82\AC", type = tensor<4xf32>} : () -> ()
// GENERIC-NEXT: "slapo.param"() {buffer, sym_name = "/*c*/ \22quoted\22", type = tensor<2xi1>} : () -> ()
slapo.param @"a\22b\0Ac*/\C3\A9" : tensor<4xf32> {aliases = ["x\22y\0Az*/\C3\A9", "back\5Cslash\\alias", "tab\09end"]}
slapo.param @"back\\slash" : tensor<4xf32>
// Raw UTF-8 in the source reads the same as its escapes.
slapo.param @"café.€" : tensor<4xf32>
slapo.param buffer @"/*c*/ \"quoted\"" : tensor<2xi1>
slapo.param @"0.layers.1.w" : tensor<4xf32>
slapo.param @"with space" : tensor<4xf32>

// CHECK-LABEL: func.func @"reads \22them\22"
func.func @"reads \22them\22"() -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xi1>, tensor<4xf32>) {
  // CHECK-NEXT: slapo.get_param @"a\22b\0Ac*/\C3\A9" : tensor<4xf32>
  // CHECK-NEXT: slapo.get_param @"back\\slash" : tensor<4xf32>
  // CHECK-NEXT: slapo.get_param @"caf\C3\A9.\E2\82\AC" : tensor<4xf32>
  // CHECK-NEXT: slapo.get_param @"/*c*/ \22quoted\22" : tensor<2xi1>
  // CHECK-NEXT: slapo.get_param @"0.layers.1.w" : tensor<4xf32>
  // GENERIC: "slapo.get_param"() {name = @"a\22b\0Ac*/\C3\A9"} : () -> tensor<4xf32>
  // GENERIC: "slapo.get_param"() {name = @"back\\slash"} : () -> tensor<4xf32>
  // GENERIC: "slapo.get_param"() {name = @"caf\C3\A9.\E2\82\AC"} : () -> tensor<4xf32>
  // GENERIC: "slapo.get_param"() {name = @"/*c*/ \22quoted\22"} : () -> tensor<2xi1>
  %0 = slapo.get_param @"a\22b\0Ac*/\C3\A9" : tensor<4xf32>
  %1 = slapo.get_param @"back\5Cslash" : tensor<4xf32>
  %2 = slapo.get_param @"caf\C3\A9.€" : tensor<4xf32>
  %3 = slapo.get_param @"/*c*/ \22quoted\22" : tensor<2xi1>
  %4 = slapo.get_param @"0.layers.1.w" : tensor<4xf32>
  return %0, %1, %2, %3, %4 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xi1>, tensor<4xf32>
}
