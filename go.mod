module github.com/quorate/quorate

go 1.26.0

// raft v1.8.0 wants go-metrics v0.7.0, which dropped the compat package that
// raft-boltdb/v2 v2.3.1 imports. v0.6.0 still has it and satisfies raft.
replace github.com/hashicorp/go-metrics => github.com/hashicorp/go-metrics v0.6.0

require github.com/stretchr/testify v1.12.1

require go.yaml.in/yaml/v3 v3.0.5 // indirect
