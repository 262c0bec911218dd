// Hand-written StableHLO whose first result has a dynamic size derived from the input's: 2*n rows.
func.func @main(%arg0: tensor<?x2xf32>) -> (tensor<?x2xf32>, tensor<2xf32>) {
  %0 = stablehlo.concatenate %arg0, %arg0, dim = 0 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.reduce(%arg0 init: %zero) applies stablehlo.add across dimensions = [0] : (tensor<?x2xf32>, tensor<f32>) -> tensor<2xf32>
  return %0, %1 : tensor<?x2xf32>, tensor<2xf32>
}
