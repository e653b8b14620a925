package loopback

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://127.0.0.1:7070", true},
		{"http://127.0.0.3:7070", true},
		{"redis://127.0.0.1:6379", true},
		{"http://localhost:1050", true},
		{"http://LocalHost:1050", true},
		{"http://[::1]:7070", true},
		{"http://10.0.0.1:7070", false},
		{"redis://192.168.1.2:6379", false},
		{"http://example.com", false},
		{"http://localhost.example.com", false},
		{"http://[::]:7070", false},
		{"127.0.0.1:7070", false}, // no scheme: url.Parse refuses it
		{"://bad", false},
	} {
		err := CheckURL(tc.url)
		assert.Equal(t, tc.ok, err == nil, "CheckURL(%q) = %v", tc.url, err)
	}
}
