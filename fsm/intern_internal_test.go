package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tierMap against a plain map over random assignments, changes and
// removals among a few names and many: it holds exactly the model's
// assignments, keeps a name only while a client is assigned to it, and a
// snapshot taken midway still reads the names of its moment after their
// ids were freed and handed to other names.
func TestTierMapAgreesWithAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	m, model := newTierMap(), map[string]string{}
	var frozen frozenTiers
	var atFreeze map[string]string
	for step := range 20_000 {
		client := fmt.Sprintf("c%d", rng.IntN(500))
		switch op := rng.IntN(10); {
		case op < 6:
			tier := fmt.Sprintf("t%d", rng.IntN(8))
			if rng.IntN(4) == 0 {
				tier = fmt.Sprintf("rare%d", rng.IntN(5_000))
			}
			m.set(client, tier)
			model[client] = tier
		default:
			m.delete(client)
			delete(model, client)
		}
		if step == 10_000 {
			frozen = m.freeze(&snapshotHold{})
			atFreeze = map[string]string{}
			for k, v := range model {
				atFreeze[k] = v
			}
		}
	}
	require.Equal(t, len(model), m.len())
	used := map[string]int{}
	for client, tier := range model {
		got, ok := m.get(client)
		assert.True(t, ok, client)
		assert.Equal(t, tier, got, client)
		used[tier]++
	}
	assert.Len(t, m.names.byName, len(used), "a name is kept only while assigned")
	for name, id := range m.names.byName {
		assert.Equal(t, name, m.names.names[id])
		assert.Equal(t, uint32(used[name]), m.names.refs[id], "clients counted for %s", name)
	}
	_, ok := m.get("nobody")
	assert.False(t, ok)

	got := map[string]string{}
	frozen.each(func(client, tier string) { got[client] = tier })
	assert.Equal(t, atFreeze, got, "the snapshot reads the names of its moment")
	for client := range 500 {
		c := fmt.Sprintf("c%d", client)
		assert.Equal(t, atFreeze[c], frozen.get(c), c)
	}
	sorted := frozen.sorted()
	require.Len(t, sorted, len(atFreeze))
	for i := 1; i < len(sorted); i++ {
		assert.Less(t, sorted[i-1].k, sorted[i].k)
	}
}

// Once most names are released, the index is rebuilt at its size.
func TestTierNamesShrink(t *testing.T) {
	m := newTierMap()
	for i := range 10_000 {
		m.set(fmt.Sprintf("c%d", i), fmt.Sprintf("t%d", i))
	}
	for i := range 9_990 {
		m.delete(fmt.Sprintf("c%d", i))
	}
	assert.Len(t, m.names.byName, 10)
	assert.LessOrEqual(t, m.names.peak, shrinkMin, "rebuilt as it fell: its peak is that of a small index")
	tier, ok := m.get("c9995")
	assert.True(t, ok)
	assert.Equal(t, "t9995", tier)
}

// recordMap against a plain map, as for tierMap: records set, replaced
// and pruned keep their strings exactly, the strings are kept only while a
// record holds them, and a snapshot reads the records of its moment.
func TestRecordMapAgreesWithAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	m, model := newRecordMap(), map[string]ClientRecord{}
	var frozen frozenRecords
	var atFreeze map[string]ClientRecord
	actors := []string{"ops", "deploy", Anonymous, ""}
	for step := range 20_000 {
		client := fmt.Sprintf("c%d", rng.IntN(300))
		switch op := rng.IntN(10); {
		case op < 7:
			r := model[client]
			if rng.IntN(2) == 0 {
				r.Assigned = Act{At: int64(step), By: actors[rng.IntN(len(actors))]}
				r.AssignedTier = fmt.Sprintf("t%d", rng.IntN(6))
			} else {
				r.Reset = Act{At: int64(step), By: fmt.Sprintf("bot%d", rng.IntN(50))}
			}
			m.set(client, r)
			model[client] = r
		default:
			cut := int64(step - 2_000)
			m.deleteIf(func(_ string, r ClientRecord) bool { return r.newestAct() < cut })
			for c, r := range model {
				if r.newestAct() < cut {
					delete(model, c)
				}
			}
		}
		if step == 10_000 {
			frozen = m.freeze(&snapshotHold{})
			atFreeze = map[string]ClientRecord{}
			for k, v := range model {
				atFreeze[k] = v
			}
		}
	}
	require.Equal(t, len(model), m.len())
	used := map[string]bool{}
	for client, r := range model {
		got, ok := m.get(client)
		assert.True(t, ok, client)
		assert.Equal(t, r, got, client)
		used[r.Assigned.By], used[r.AssignedTier], used[r.Reset.By] = true, true, true
	}
	assert.Len(t, m.names.byName, len(used), "a string is kept only while a record holds it")
	got := map[string]ClientRecord{}
	frozen.each(func(client string, r ClientRecord) { got[client] = r })
	assert.Equal(t, atFreeze, got, "the snapshot reads the records of its moment")
	assert.Len(t, frozen.sorted(), len(atFreeze))
}
