"""The first hour (issue 37): any card by the name a user types. Every name from the issue resolves to one card or
is refused with the cards it could be ('did you mean'); the catalog holds at least 40 cards, each with the source of
its CUDA total; a name that fits several cards (A100: 40 or 80 GB) is never silently one of them."""

import pytest

from vrambudget.errors import UserError
from vrambudget.hardware.catalog import catalog, lookup

RESOLVE = {"RTX A6000": "rtx-a6000", "L40": "l40", "A10G": "a10g", "H100 PCIe": "h100-pcie", "H100 NVL": "h100-nvl",
           "3090 Ti": "rtx3090ti", "RTX 5080": "rtx5080", "4090 24GB": "rtx4090", "A100-80G": "a100-80gb",
           "RTX 4090": "rtx4090", "rtx-4090": "rtx4090", "rtx 4090": "rtx4090", "GEFORCE RTX 4090": "rtx4090",
           "V100 32GB": "v100-32gb", "A100 40GB": "a100-40gb", "l40s": "l40s", "T4": "t4", "B200": "b200",
           "H20": "h20", "GB10": "gb10", "RTX 4070 Ti Super": "rtx4070ti-super", "RTX 5060 Ti": "rtx5060ti"}


@pytest.mark.parametrize("name, key", RESOLVE.items())
def test_names_people_type_resolve(name, key):
    assert lookup(name).key == key


@pytest.mark.parametrize("name, cards", [("A100", ("a100-40gb", "a100-80gb")), ("V100", ("v100-16gb", "v100-32gb"))])
def test_a_name_that_fits_several_cards_is_refused_with_them(name, cards):
    with pytest.raises(UserError, match="fits 2 cards") as e:
        lookup(name)
    assert all(c in str(e.value) for c in cards)


@pytest.mark.parametrize("name, hint", [("rtx 4090x", "rtx4090"), ("H100 PCI", "h100-pcie"), ("RTX A600", "rtx-a6000")])
def test_a_typo_gets_did_you_mean(name, hint):
    with pytest.raises(UserError, match="did you mean") as e:
        lookup(name)
    assert hint in str(e.value)


def test_a_memory_the_card_does_not_have_is_refused():
    with pytest.raises(UserError, match="has 24 GB, not 48"):
        lookup("4090 48GB")


def test_the_catalog_has_40_sourced_cards():
    cards = catalog()
    assert len(cards) >= 40
    for g in cards.values():
        assert g.source and g.total_bytes > 4 << 30 and g.sms, g.key
        # each total names where it comes from: a measurement, a public figure's reference, or the estimate's basis
        assert any(ref in g.source for ref in ("measured", "estimate", "find_string", "search tool", "github",
                                               "http", "fixtures/", "total capacity of", "vLLM log")), (g.key, g.source[:80])


def test_version_and_bundled_hub_ids_offline(monkeypatch, capsys):
    import sys

    from vrambudget import __version__, cli

    monkeypatch.setattr(sys, "argv", ["vrambudget", "--version"])
    cli.main()
    assert capsys.readouterr().out.startswith(f"vrambudget {__version__} (plans vLLM 0.10 to 0.33.x")
    # the two ids, offline: the bundled profiles answer (no network touched)
    from vrambudget.model.checkpoint import resolve_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("vrambudget.model.checkpoint._hub", lambda ref: (_ for _ in ()).throw(AssertionError(ref)))
    for hf_id, name in (("Qwen/Qwen3-8B", "qwen3-8b"), ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
                        ("qwen/qwen3-8b", "qwen3-8b")):
        src = resolve_model(hf_id)
        assert (src.origin, src.ref) == ("bundled", name) and hf_id.lower() in src.description.lower()
