// RUN: slapo-opt --slapo-autodiff --slapo-optimizer="optimizer=sgd lr=0.1" --slapo-plan-memory %s | slapo-translate --slapo-to-cpp > %t.cpp
// RUN: FileCheck %s < %t.cpp
// RUN: c++ -std=c++17 -fsyntax-only -Wall -Werror -I%runtime_include %t.cpp

// Constants are written once by initialize(): a splat as a fill, any other
// as its little-endian bytes (bools one byte each), copied in.
module {
  slapo.param @w : tensor<2xf32>
  func.func @forward(%x: tensor<2xf32>) -> tensor<f32> {
    %w = slapo.get_param @w : tensor<2xf32>
    %c = slapo.constant dense<[1.0, 0xFF800000]> : tensor<2xf32>
    %m = slapo.constant dense<[true, false]> : tensor<2xi1>
    %z = slapo.constant dense<0.5> : tensor<f32>
    %y = slapo.mul %x, %w : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %s = slapo.where %m, %y, %c : (tensor<2xi1>, tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %t = slapo.mul %s, %z : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
    %l = slapo.sum %t {dims = array<i64: 0>, keepdim = false} : tensor<2xf32> -> tensor<f32>
    return %l : tensor<f32>
  }
}

// 1.0f is 0x3f800000 and -inf 0xff800000, low byte first.
// CHECK: alignas(64) const uint8_t [[FLOATS:kConstant[0-9]+]][] = {
// CHECK-NEXT: 0, 0, 128, 63, 0, 0, 128, 255,
// CHECK-NEXT: };
// CHECK: alignas(64) const uint8_t [[BOOLS:kConstant[0-9]+]][] = {
// CHECK-NEXT: 1, 0,
// CHECK-NEXT: };
// CHECK: void initialize(Device &device, ProcessMesh &mesh, uint8_t *arena, int64_t step) {
// CHECK: copyFrom(ctx, t{{[0-9]+}}_constant, [[FLOATS]]);
// CHECK: copyFrom(ctx, t{{[0-9]+}}_constant, [[BOOLS]]);
// CHECK: fill(ctx, t{{[0-9]+}}_constant, 0.5);
