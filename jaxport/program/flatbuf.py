"""JAX's serialization as a flatbuffer, read with :mod:`struct` alone: the bytes with every offset and length checked
against them (:class:`Buffer`: Python integers, no wrap-around; a table's fields inside the table; at most
:data:`MAX_ITEMS` vector elements in a file, strings of at most :data:`MAX_STRING_BYTES` bytes of strict UTF-8, each
decoded once), and a table's fields by name (:class:`Table`, by :data:`SCHEMA`, the order of JAX's
``serialization.fbs``). What the fields mean, and the records they make, is ``jaxser``'s. Anything malformed is a
:class:`~jaxport.errors.FormatError` naming the file and the field.
"""

from __future__ import annotations

import struct

from .._text import plural
from ..errors import FormatError

#: The most vector elements (tree nodes, avals, dimensions, shardings, names, indices) read from one file.
MAX_ITEMS = 1_000_000
#: The longest string read (a name, a dimension expression, a dict key), in UTF-8 bytes.
MAX_STRING_BYTES = 1 << 16


# -- the schema -----------------------------------------------------------------------------------------------------
# Each table's fields in serialization.fbs order: field i lies in vtable slot 4 + 2 * i. Which writers store which
# field, and which one JAX reads where two say the same: the module docstring.
SCHEMA = {
    "Exported": "serialization_version function_name in_tree in_avals out_tree out_avals nr_devices_short "
                "in_shardings out_shardings platforms ordered_effects unordered_effects disabled_checks "
                "mlir_module_serialized calling_convention_version module_kept_var_idx uses_global_constants vjp "
                "nr_devices unique_avals unique_abstract_meshes unique_named_shardings in_avals_idxs out_avals_idxs "
                "in_shardings_idxs out_shardings_idxs jax_version",
    "PyTreeDef": "kind children children_names custom_name custom_auxdata",
    "AbstractValue": "kind shape dtype memory_space weak_type",
    "Sharding": "kind hlo_sharding_proto named_sharding",
    "NamedSharding": "mesh spec memory_kind abstract_mesh_idx",
    "AbstractMesh": "axis_sizes axis_names axis_types abstract_device",
    "PartitionSpec": "partitions reduced unreduced",
    "PartitionSpecOneAxis": "axes",
    "Effect": "type_name",
    "DisabledSafetyCheck": "kind custom_call_target",
}
SLOTS = {table: {name: 4 + 2 * i for i, name in enumerate(fields.split())} for table, fields in SCHEMA.items()}

I8, U8, U16, I16, U32, I32 = (struct.Struct(f"<{c}") for c in "bBHhIi")
_VTABLE_HEAD = struct.Struct("<HH")


class Buffer:
    """The bytes being read, with the bounds checks, the item budget and the decoded strings."""

    __slots__ = ("data", "size", "where", "items", "_strings", "_blobs")

    def __init__(self, data: bytes, where: str) -> None:
        self.data, self.size, self.where, self.items = data, len(data), where, 0
        self._strings: dict[int, str] = {}
        self._blobs: dict[int, bytes] = {}

    def fail(self, detail: str) -> FormatError:
        return FormatError(f"{self.where}: not a JAX serialization: {detail}.")

    def unknown(self, what: str, value: int, enum: str, names: tuple[str, ...]) -> FormatError:
        return FormatError(f"{self.where}: {what} is {value}, an unknown {enum} (this jaxport knows 0 to "
                           f"{len(names) - 1}); the serialization may come from a newer JAX: upgrade jaxport to read "
                           f"it.")

    def spend(self, count: int, what: str) -> None:
        self.items += count
        if self.items > MAX_ITEMS:
            raise FormatError(f"{self.where}: the JAX serialization is too large for this reader: with {what} it holds "
                              f"more than {MAX_ITEMS:,} tree nodes, avals, dimensions, shardings and names.")

    def need(self, pos: int, size: int, what: str) -> None:
        if pos + size > self.size:
            if pos >= self.size:
                raise self.fail(f"{what} (offset {pos}) is past the end of the {self.size}-byte file")
            raise self.fail(f"{what} ({size} bytes at offset {pos}) runs past the end of the {self.size}-byte file")

    def scalar(self, layout: struct.Struct, pos: int, what: str) -> int:
        self.need(pos, layout.size, what)
        return int(layout.unpack_from(self.data, pos)[0])

    def root(self) -> Table:
        if self.size < 12:
            raise self.fail(f"the file is {plural(self.size, 'byte')}, shorter than the smallest flatbuffer (12 "
                            f"bytes)" if self.size else "the file is empty")
        return self.table(self.scalar(U32, 0, "the root table offset"), "Exported", "the root table", "")

    def table(self, pos: int, type_name: str, what: str, path: str) -> Table:
        """The table of TYPE_NAME at POS; WHAT names it in messages, PATH prefixes the names of its fields."""
        vtable = pos - self.scalar(I32, pos, what)
        if vtable < 0 or vtable + 4 > self.size:
            raise self.fail(f"{what} (offset {pos}) points to a vtable at offset {vtable}, outside the "
                            f"{self.size}-byte file")
        vtable_size, table_size = _VTABLE_HEAD.unpack_from(self.data, vtable)
        if vtable_size < 4 or vtable_size % 2:
            raise self.fail(f"{what} (offset {pos}) has a {vtable_size}-byte vtable (a vtable is an even number of "
                            f"bytes, at least 4)")
        if vtable + vtable_size > self.size:
            raise self.fail(f"{what} (offset {pos}): its {vtable_size}-byte vtable at offset {vtable} runs past the "
                            f"end of the {self.size}-byte file")
        if table_size < 4:
            raise self.fail(f"{what} (offset {pos}) claims to be {table_size} bytes long (a table is at least 4)")
        self.need(pos, table_size, what)
        return Table(self, pos, vtable, vtable_size, table_size, type_name, path)

    def vector(self, pos: int, item_size: int, what: str) -> tuple[int, int]:
        """``(start, length)`` of the vector at POS, whose items are ITEM_SIZE bytes."""
        length = self.scalar(U32, pos, what)
        if pos + 4 + length * item_size > self.size:
            raise self.fail(f"{what} (offset {pos}) claims {plural(length, 'item')} of {plural(item_size, 'byte')}, "
                            f"past the end of the {self.size}-byte file")
        return pos + 4, length

    def numbers(self, pos: int, code: str, what: str) -> tuple[int, ...]:
        """The vector of integers (struct CODE) at POS."""
        size = struct.calcsize(code)
        start, length = self.vector(pos, size, what)
        self.spend(length, what)
        return struct.unpack_from(f"<{length}{code}", self.data, start)

    def references(self, pos: int, what: str) -> list[int]:
        """Where each offset of the vector of tables or strings at POS points."""
        start, length = self.vector(pos, 4, what)
        self.spend(length, what)
        offsets = struct.unpack_from(f"<{length}I", self.data, start)
        return [start + 4 * i + offset for i, offset in enumerate(offsets)]

    def string(self, pos: int, what: str) -> str:
        if pos in self._strings:
            return self._strings[pos]
        start, length = self.vector(pos, 1, what)
        if length > MAX_STRING_BYTES:
            raise self.fail(f"{what} (offset {pos}) is {length} bytes long, over this reader's limit of "
                            f"{MAX_STRING_BYTES}")
        try:
            text = self.data[start:start + length].decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{what} (offset {pos}) is not UTF-8 (byte {e.start} of the string: {e.reason})") from None
        self._strings[pos] = text
        return text

    def blob(self, pos: int, what: str) -> bytes:
        if pos not in self._blobs:
            start, length = self.vector(pos, 1, what)
            self._blobs[pos] = self.data[start:start + length]
        return self._blobs[pos]


class Table:
    """One table of the flatbuffer, of a type of :data:`SCHEMA`: its fields by name, each read with bounds checks.
    PATH prefixes the names of its fields in messages."""

    __slots__ = ("buf", "pos", "vtable", "vtable_size", "size", "slots", "path")

    def __init__(self, buf: Buffer, pos: int, vtable: int, vtable_size: int, size: int, type_name: str,
                 path: str) -> None:
        self.buf, self.pos, self.vtable, self.vtable_size, self.size = buf, pos, vtable, vtable_size, size
        self.slots, self.path = SLOTS[type_name], path

    def field(self, name: str, size: int) -> int:
        """Where field NAME lies (SIZE bytes), or 0 when the table does not store it."""
        slot = self.slots[name]
        if slot >= self.vtable_size:
            return 0
        offset: int = U16.unpack_from(self.buf.data, self.vtable + slot)[0]
        if offset and offset + size > self.size:
            raise self.buf.fail(f"{self.path}{name} (byte {offset} of the {self.size}-byte table at offset "
                                f"{self.pos}) lies outside its table")
        return self.pos + offset if offset else 0

    def scalar(self, name: str, layout: struct.Struct) -> int:
        """A number field; 0 (every field's default in JAX's schema) when not stored."""
        at = self.field(name, layout.size)
        return int(layout.unpack_from(self.buf.data, at)[0]) if at else 0

    def enum(self, name: str, enum: str, names: tuple[str, ...]) -> str:
        value = self.scalar(name, I8)
        if not 0 <= value < len(names):
            raise self.buf.unknown(self.path + name, value, enum, names)
        return names[value]

    def ref(self, name: str) -> int:
        """Where the table, vector or string field NAME points, or 0 when not stored (offsets only point forward, so
        a stored one never points to 0)."""
        at = self.field(name, 4)
        return at + U32.unpack_from(self.buf.data, at)[0] if at else 0

    def table(self, name: str, type_name: str) -> Table | None:
        at = self.ref(name)
        return self.buf.table(at, type_name, self.path + name, f"{self.path}{name}.") if at else None

    def tables(self, name: str, type_name: str) -> list[Table]:
        """The vector of tables NAME, each named NAME[i] in messages (none when not stored)."""
        at, what = self.ref(name), self.path + name
        return [self.buf.table(p, type_name, f"{what}[{i}]", f"{what}[{i}].")
                for i, p in enumerate(self.buf.references(at, what))] if at else []

    def string(self, name: str) -> str | None:
        at = self.ref(name)
        return self.buf.string(at, self.path + name) if at else None

    def strings(self, name: str) -> tuple[str, ...]:
        at, what = self.ref(name), self.path + name
        return tuple(self.buf.string(p, f"{what}[{i}]") for i, p in enumerate(self.buf.references(at, what))
                     ) if at else ()

    def numbers(self, name: str, code: str) -> tuple[int, ...]:
        at = self.ref(name)
        return self.buf.numbers(at, code, self.path + name) if at else ()

    def blob(self, name: str) -> bytes | None:
        at = self.ref(name)
        return self.buf.blob(at, self.path + name) if at else None
