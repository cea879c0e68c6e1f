"""The op builders the codegen passes share (kiln.lowering.codegen.builders): declarations made
once, constants built once and grouped where every later op can use them, addresses of memref
elements as the C side sees them."""
from torch_mlir import ir
from torch_mlir.dialects import func

from kiln.context import make_context
from kiln.lowering.codegen import builders


def _module():
    return ir.Module.parse("func.func @f(%m: memref<4x8xf32, strided<[16, 1], offset: 3>>) {\n"
                           "  return\n}")


def test_external_declaration_is_private_and_made_once():
    with make_context(), ir.Location.unknown():
        module = _module()
        symbols = ir.SymbolTable(module.operation)
        for _ in range(2):
            builders.declare_external(module, symbols, "kiln_ext", [builders.pointer(),
                                                                    builders.i64()],
                                      [builders.i32()])
        decls = [op for op in module.body.operations if "kiln_ext" in str(op.operation)]
        assert len(decls) == 1
        assert str(decls[0]) == "func.func private @kiln_ext(!llvm.ptr, i64) -> i32"
        assert builders.unique_symbol(symbols, "kiln_ext") == "kiln_ext_"
        assert builders.unique_symbol(symbols, "free") == "free"
        assert module.operation.verify()


def test_constants_are_built_once_at_the_top_in_order_of_first_use():
    with make_context(), ir.Location.unknown():
        module = _module()
        symbols = ir.SymbolTable(module.operation)
        fn = builders.define_private(module, symbols, "g", [])
        entry = fn.entry_block
        with ir.InsertionPoint(entry):
            ret = func.ReturnOp([])
        const = builders.Constants(entry)
        with ir.InsertionPoint(ret):
            a = const(7)
            func.CallOp([], ir.FlatSymbolRefAttr.get("g"), [])
            b = const(2, builders.i32())
            assert const(7) == a and const(2, builders.i32()) == b
        names = [op.operation.name for op in entry.operations]
        assert names == ["arith.constant", "arith.constant", "func.call", "func.return"]
        assert "7 : index" in str(entry.operations[0]) and "2 : i32" in str(entry.operations[1])

        newest = builders.Constants(entry, builders.llvm_constant, newest_first=True)
        newest(1, builders.i64()), newest(5, builders.i64())
        assert "llvm.mlir.constant(5 : i64)" in str(entry.operations[0])
        assert "llvm.mlir.constant(1 : i64)" in str(entry.operations[1])
        assert module.operation.verify()


def test_element_address_adds_the_offset_in_bytes():
    with make_context(), ir.Location.unknown():
        module = _module()
        f = module.body.operations[0]
        block = f.regions[0].blocks[0]
        const = builders.Constants(block)
        with ir.InsertionPoint(block.operations[0]):
            ptr = builders.as_pointer(builders.element_address(block.arguments[0], 4, const))
        assert str(ptr.type) == "!llvm.ptr"
        text = str(f)
        for piece in ("memref.extract_aligned_pointer_as_index", "memref.extract_strided_metadata",
                      "arith.constant 4 : index", "arith.muli", "arith.addi",
                      "arith.index_cast", "llvm.inttoptr"):
            assert piece in text, piece
        assert module.operation.verify()


def test_enum_attributes():
    with make_context():
        assert str(builders.iterator_type("reduction")) == "#linalg.iterator_type<reduction>"
        assert str(builders.fastmath("reassoc")) == "#arith.fastmath<reassoc>"
