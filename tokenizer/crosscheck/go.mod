module github.com/k3-project/k3/tokenizer/crosscheck

go 1.26.0

require (
	github.com/k3-project/k3 v0.0.0
	github.com/pkoukk/tiktoken-go v0.1.8
)

require (
	github.com/dlclark/regexp2 v1.10.0 // indirect
	github.com/google/uuid v1.3.0 // indirect
)

replace github.com/k3-project/k3 => ../..
