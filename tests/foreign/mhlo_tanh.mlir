// Written in the MHLO dialect, as JAX and jax2tf wrote modules before StableHLO (jax2tf serialization versions 1-3).
module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<2x3xf32> {jax.arg_info = "x", mhlo.sharding = "{replicated}"}) -> (tensor<2x3xf32> {jax.result_info = ""}) {
    %0 = mhlo.constant dense<5.000000e-01> : tensor<f32>
    %1 = "mhlo.broadcast_in_dim"(%0) {broadcast_dimensions = dense<> : tensor<0xi64>} : (tensor<f32>) -> tensor<2x3xf32>
    %2 = mhlo.multiply %arg0, %1 : tensor<2x3xf32>
    %3 = mhlo.tanh %2 : tensor<2x3xf32>
    return %3 : tensor<2x3xf32>
  }
}
