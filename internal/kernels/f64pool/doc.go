// Package f64pool recycles the float64 buffers that the mat-vec kernels widen
// their activations into, so a decode step does not allocate one per call.
//
// A buffer is owned by exactly one caller between Get and Put, so kernels
// running on many goroutines never share one. Its contents on Get are
// unspecified: callers overwrite every element they read.
//
// It imports only the standard library and nothing of the module, so the
// weight-format packages (quant, quant/mxfp4) may use it freely.
package f64pool
