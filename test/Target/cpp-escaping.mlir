// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=sgd lr=0.1" --slapo-plan-memory --mlir-print-debuginfo %s | slapo-translate --slapo-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fsyntax-only -Wall -Werror -I%runtime_include %t.cpp

// Names from the model reach the generated code only as escaped literals:
// a quote, a backslash, a newline or a comment end in a parameter, input or
// module name cannot end a string or a comment, and identifiers never come
// from names. The compile above fails if any of them escaped.
module {
  slapo.param @"w\22); system(\22boom\22); //\0A*/ \5C" : tensor<4xf32>
  func.func @forward(%x: tensor<4xf32> {slapo.name = "x\22, 0}}; int injected; //"}) -> tensor<f32> {
    %w = slapo.get_param @"w\22); system(\22boom\22); //\0A*/ \5C" {slapo.module = "blocks.0\0A#include <cstdlib>\0Aint x;"} : tensor<4xf32> loc(#evil)
    %y = slapo.mul %x, %w {slapo.module = "blocks.0\0A#include <cstdlib>\0Aint x;"} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc(#evil)
    %l = slapo.sum %y {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}
#evil = loc("model.py":1:0)

// CHECK: // "blocks.0\012\043include \074cstdlib\076\012int x\073": mul
// CHECK: // "w\042\051\073 system\050\042boom\042\051\073 //\012\052/ \134": sgd_update
// CHECK: {"w\042\051\073 system\050\042boom\042\051\073 //\012\052/ \134", DType::F32, {4}, 0},
// CHECK: {{[{][{]}}"x\042\054 0\175\175\073 int injected\073 //", DType::F32, {4},
// CHECK-NOT: int injected;
