"""The FFMA order and the `.reuse` flags under the cache model."""
from handmade import ffma, node

from sass_rewrite.ordering import FIXED_WALKS, ffma_order, reuse_bits, template_order


def outer_product(na, nb):
    """[(bank a, bank b, bank c, a label, b label)] of an na x nb outer product."""
    return [(i % 2, j % 2, (i + j) % 2, ("a", i), ("b", j)) for i in range(na) for j in range(nb)]


def test_ffma_order_visits_every_cell_once_and_uses_the_cache():
    cells = outer_product(2, 4)
    order, cost = ffma_order(cells, beam=16)
    assert sorted(k for k, _sw in order) == list(range(len(cells)))
    # Without any reuse every FFMA reads three registers: the order must do better.
    assert cost < 8 * (100 + 3)
    one_entry, cost1 = ffma_order(cells, beam=16, per_bank=False)
    assert sorted(k for k, _sw in one_entry) == list(range(len(cells))) and cost1 >= cost


def test_fixed_walks_share_an_operand_with_the_ffma_before():
    cells = outer_product(8, 16)
    for name in FIXED_WALKS:
        order = template_order(cells, name)
        assert sorted(k for k, _sw in order) == list(range(len(cells))), name
        for (k1, _s1), (k2, _s2) in zip(order, order[1:]):
            a1, b1, a2, b2 = cells[k1][3], cells[k1][4], cells[k2][3], cells[k2][4]
            # The block walks jump between blocks; within a block every step shares an operand.
            assert a1 == a2 or b1 == b2 or name.startswith("walk"), (name, cells[k1], cells[k2])
    assert all(sw for _k, sw in template_order(cells, "cols"))  # the held b value in slot b


def test_reuse_flags_follow_slot_and_bank_and_stop_at_slot_readers():
    seq = [ffma(0, 40, 8, 12, 40), ffma(1, 41, 9, 12, 41), ffma(2, 42, 8, 13, 42),
           node(3, "LDS.128 R4, [R15+0x210]", 4 << 16 | 15 << 24), ffma(4, 43, 8, 13, 43)]
    ops = {n.idx: tuple(r for *_x, r in n.slot_regs) for n in seq if n.kind == "ffma"}
    bits = reuse_bits(seq, ops, boundaries={0})
    # R8 (slot a, bank 0): the next slot-a bank-0 read is R8 at 2 -> kept; R9 at 1 is bank 1.
    assert bits[0] & 1
    # R12 (slot b) is read again by 1: kept; 1's R12 is followed by R13 (bank 1) then nothing in bank 0.
    assert bits[0] & 2 and not bits[1] & 2
    # The LDS reads slot a (its address): R8 is not kept across it; slot b (R13) is.
    assert not bits[2] & 1 and bits[2] & 2
    # With one entry per slot R12 at 0 is still kept (1 reads it next), R8 at 0 is not (1 reads R9).
    single = reuse_bits(seq, ops, boundaries={0}, per_bank=False)
    assert single[0] == 0b10
    # A branch target between two readers clears the cache: 0's R12 is not kept for 1.
    assert not reuse_bits(seq, ops, boundaries={0, 1})[0] & 2


def test_reuse_flag_not_kept_across_a_write_of_the_register():
    # Slot b: R13 read, then an LDS loads R12-R15 (its address in slot a only), then R13
    # read again: the second read wants the new value, so the first must not keep R13.
    seq = [ffma(0, 40, 8, 13, 40), node(1, "LDS.128 R12, [R4+0x10]", 12 << 16 | 4 << 24), ffma(2, 41, 8, 13, 41)]
    ops = {n.idx: tuple(r for *_x, r in n.slot_regs) for n in seq if n.kind == "ffma"}
    written = lambda n: {r + k for _f, w, d, r in n.slot_regs if d for k in range(w)}  # noqa: E731
    assert reuse_bits(seq, ops, boundaries={0})[0] & 2  # the rule without writes: kept
    assert not reuse_bits(seq, ops, boundaries={0}, written=written)[0] & 2
