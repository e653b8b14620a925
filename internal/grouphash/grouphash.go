// Package grouphash is the one definition of which data group a client id
// belongs to, as GET /v1/routes documents it ("fnv1a64-mod"): the 64-bit
// FNV-1a hash of the id's bytes, modulo the number of data groups. The
// cluster routes by it, and the tools that send decisions straight to a
// group's leader (the load generator, the failover timer, the fault
// suite's client) use it instead of a copy.
package grouphash

// Name is the hash's name in GET /v1/routes.
const Name = "fnv1a64-mod"

// Of returns client's data group among groups (> 0). It is FNV-1a as in
// hash/fnv, inlined so that hashing allocates nothing.
func Of(client string, groups int) int {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(client); i++ {
		h ^= uint64(client[i])
		h *= prime64
	}
	return int(h % uint64(groups))
}
