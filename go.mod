module github.com/k3-project/k3

go 1.26.0

require (
	github.com/pkoukk/tiktoken-go v0.1.8
	github.com/stretchr/testify v1.12.1
	golang.org/x/sys v0.50.0
)

require (
	github.com/dlclark/regexp2 v1.10.0 // indirect
	github.com/google/uuid v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
