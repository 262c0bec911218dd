// Written in the style torch-xla emits for torch.nn.Linear(4, 3) (parameters first: bias, weight, then the input;
// the result in a tuple).
module @IrToHlo.14 attributes {mhlo.cross_program_prefetches = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<3xf32>, %arg1: tensor<3x4xf32>, %arg2: tensor<2x4xf32>) -> tuple<tensor<2x3xf32>> {
    %0 = stablehlo.transpose %arg1, dims = [1, 0] : (tensor<3x4xf32>) -> tensor<4x3xf32>
    %1 = stablehlo.dot_general %arg2, %0, contracting_dims = [1] x [0], precision = [HIGHEST, HIGHEST] : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %2 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %3 = stablehlo.add %1, %2 : tensor<2x3xf32>
    %4 = stablehlo.tuple %3 {xla_shape = "(f32[2,3]{1,0})"} : tuple<tensor<2x3xf32>>
    return %4 : tuple<tensor<2x3xf32>>
  }
}
