// Hand-written StableHLO on 64-bit integers with two results, one of them boolean.
func.func @main(%arg0: tensor<2x3xi64>, %arg1: tensor<2x3xi64>) -> (tensor<2x3xi64>, tensor<2x3xi1>) {
  %0 = stablehlo.add %arg0, %arg1 : tensor<2x3xi64>
  %1 = stablehlo.compare GT, %arg0, %arg1, SIGNED : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi1>
  return %0, %1 : tensor<2x3xi64>, tensor<2x3xi1>
}
