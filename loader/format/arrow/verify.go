package arrow

import (
	"encoding/binary"
	"fmt"

	"github.com/loaderd/loaderd/loader"
)

// verifyArrowFooter checks, before arrow-go parses an IPC file's footer,
// every flatbuffer vector whose length arrow-go allocates from: the
// schema's fields, each field's children (recursively) and the custom
// metadata. arrow-go trusts those lengths, and one corrupt uint32 there
// makes it allocate hundreds of gigabytes: a fatal out-of-memory that no
// recover catches (found by FuzzArrowIndex). Other corruption makes it
// panic or fail, which index handles. The offsets follow
// arrow/format/File.fbs and Schema.fbs.
func verifyArrowFooter(data []byte) error {
	const eof = 4 + 6 // footer size, "ARROW1"
	if len(data) < 8+eof || string(data[len(data)-6:]) != "ARROW1" {
		return fmt.Errorf("%w: not an Arrow IPC file (no ARROW1 magic at the end)", loader.ErrCorrupt)
	}
	size := int64(binary.LittleEndian.Uint32(data[len(data)-eof:]))
	if size <= 0 || size > int64(len(data)-8-eof) {
		return fmt.Errorf("%w: footer of %d bytes in a %d-byte file", loader.ErrCorrupt, size, len(data))
	}
	v := fbVerifier{buf: data[int64(len(data))-eof-size : len(data)-eof]}
	footer, ok := v.root()
	if !ok {
		return v.err()
	}
	if schema, ok := v.table(footer, 1); ok { // Footer.schema
		v.fields(schema, 1, 0) // Schema.fields
		v.keyValues(schema, 2) // Schema.custom_metadata
		v.vector(schema, 3, 8) // Schema.features
	}
	v.vector(footer, 2, 24) // Footer.dictionaries: Block structs
	v.vector(footer, 3, 24) // Footer.recordBatches
	v.keyValues(footer, 4)
	return v.err()
}

// fbVerifier walks a flatbuffer, recording the first bound it finds broken.
type fbVerifier struct {
	buf []byte
	bad string
}

func (v *fbVerifier) fail(format string, args ...any) {
	if v.bad == "" {
		v.bad = fmt.Sprintf(format, args...)
	}
}

func (v *fbVerifier) err() error {
	if v.bad == "" {
		return nil
	}
	return fmt.Errorf("%w: arrow footer: %s", loader.ErrCorrupt, v.bad)
}

func (v *fbVerifier) u32(at int) (int, bool) {
	if at < 0 || at > len(v.buf)-4 {
		v.fail("offset %d outside the footer", at)
		return 0, false
	}
	return int(binary.LittleEndian.Uint32(v.buf[at:])), true
}

func (v *fbVerifier) root() (int, bool) { return v.tableAt(0) }

// tableAt follows the uoffset at `at` to a table and checks its vtable.
func (v *fbVerifier) tableAt(at int) (int, bool) {
	off, ok := v.u32(at)
	if !ok {
		return 0, false
	}
	t := at + off
	so, ok := v.u32(t)
	if !ok {
		return 0, false
	}
	vt := t - int(int32(so))
	if vt < 0 || vt > len(v.buf)-4 {
		v.fail("vtable of table %d at %d, outside the footer", t, vt)
		return 0, false
	}
	if n := int(binary.LittleEndian.Uint16(v.buf[vt:])); n < 4 || vt+n > len(v.buf) {
		v.fail("vtable of %d bytes at %d", n, vt)
		return 0, false
	}
	return t, true
}

// field returns where slot's value lies in table t, if present.
func (v *fbVerifier) field(t, slot int) (int, bool) {
	so, _ := v.u32(t)
	vt := t - int(int32(so))
	n := int(binary.LittleEndian.Uint16(v.buf[vt:]))
	if 4+2*slot+2 > n {
		return 0, false
	}
	o := int(binary.LittleEndian.Uint16(v.buf[vt+4+2*slot:]))
	return t + o, o != 0
}

func (v *fbVerifier) table(t, slot int) (int, bool) {
	at, ok := v.field(t, slot)
	if !ok || v.bad != "" {
		return 0, false
	}
	return v.tableAt(at)
}

// vector checks the vector in slot: its elements of elem bytes lie in the
// buffer. It returns where they start and how many there are.
func (v *fbVerifier) vector(t, slot, elem int) (start, n int) {
	at, ok := v.field(t, slot)
	if !ok || v.bad != "" {
		return 0, 0
	}
	off, ok := v.u32(at)
	if !ok {
		return 0, 0
	}
	vec := at + off
	n, ok = v.u32(vec)
	if !ok {
		return 0, 0
	}
	if n > (len(v.buf)-vec-4)/elem {
		v.fail("vector of %d %d-byte elements at %d, in a %d-byte footer", n, elem, vec, len(v.buf))
		return 0, 0
	}
	return vec + 4, n
}

// fields checks a vector of Field tables, their children to any depth,
// their custom metadata and union type ids.
func (v *fbVerifier) fields(t, slot, depth int) {
	start, n := v.vector(t, slot, 4)
	if depth > 64 {
		v.fail("fields nested over 64 deep")
		return
	}
	for i := 0; i < n && v.bad == ""; i++ {
		f, ok := v.tableAt(start + 4*i)
		if !ok {
			return
		}
		v.vector(f, 0, 1)                                                      // Field.name
		if tt, ok := v.field(f, 2); ok && tt < len(v.buf) && v.buf[tt] == 14 { // Field.type_type == Union
			if u, ok := v.table(f, 3); ok {
				v.vector(u, 1, 4) // Union.typeIds
			}
		}
		v.fields(f, 5, depth+1) // Field.children
		v.keyValues(f, 6)       // Field.custom_metadata
	}
}

// keyValues checks a vector of KeyValue tables and their strings.
func (v *fbVerifier) keyValues(t, slot int) {
	start, n := v.vector(t, slot, 4)
	for i := 0; i < n && v.bad == ""; i++ {
		kv, ok := v.tableAt(start + 4*i)
		if !ok {
			return
		}
		v.vector(kv, 0, 1)
		v.vector(kv, 1, 1)
	}
}
