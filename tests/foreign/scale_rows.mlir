// Hand-written StableHLO with a dynamic batch: x * scale + 1, broadcasting scale over the rows.
module @scale_rows {
  func.func public @main(%x: tensor<?x3xf32>, %scale: tensor<3xf32>) -> tensor<?x3xf32> {
    %n = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x3xf32>) -> tensor<i32>
    %n1 = stablehlo.reshape %n : (tensor<i32>) -> tensor<1xi32>
    %c3 = stablehlo.constant dense<3> : tensor<1xi32>
    %shape = stablehlo.concatenate %n1, %c3, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
    %s = stablehlo.dynamic_broadcast_in_dim %scale, %shape, dims = [1] : (tensor<3xf32>, tensor<2xi32>) -> tensor<?x3xf32>
    %one = stablehlo.constant dense<1.0> : tensor<f32>
    %ones = stablehlo.dynamic_broadcast_in_dim %one, %shape, dims = [] : (tensor<f32>, tensor<2xi32>) -> tensor<?x3xf32>
    %0 = stablehlo.multiply %x, %s : tensor<?x3xf32>
    %1 = stablehlo.add %0, %ones : tensor<?x3xf32>
    return %1 : tensor<?x3xf32>
  }
}
