"""The PL checkpoint field names only folders under the checkpoints root, and says nothing else.

Before, it took any folder of the server (`../` and absolute paths included) and its errors told
which folders exist ("does not exist", "has no config.json"): a researcher could map the disk.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.conf import LazySettings
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from judges.models import PLTraining
from judges.reward.hf import CHECKPOINT_REFUSED
from judges.reward.services import TrainingRequest, pl_training_start
from tests.conftest import PASSWORD, Cast
from tests.judges.reward.conftest import ranked_study

pytestmark = pytest.mark.django_db


def fake_checkpoint(folder: Path) -> Path:
    """A folder that passes the checkpoint check: a one-logit classifier's config and weights."""
    folder.mkdir(parents=True)
    config = {"architectures": ["BertForSequenceClassification"], "num_labels": 1}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder


@pytest.fixture
def layout(settings: LazySettings, tmp_path: Path) -> Path:
    """tmp/checkpoints (the root) holding `good`, a file and a link out; tmp/outside beside it."""
    root = tmp_path / "checkpoints"
    fake_checkpoint(root / "good")
    fake_checkpoint(tmp_path / "outside")
    (root / "notes.txt").write_text("not a folder")
    (root / "link-out").symlink_to(tmp_path / "outside")
    settings.CONCORD_PL_CHECKPOINTS_ROOT = root
    return tmp_path


REFUSED = [
    "../outside",  # a real checkpoint beside the root
    "good/../../outside",
    "link-out",  # a link inside the root to a folder outside it
    "link-out/../checkpoints/good/../../outside",
    "/etc",
    "/",
    "missing",
    "notes.txt",
    ".",
    "",
    "   ",
]


@pytest.mark.parametrize("value", REFUSED)
def test_anything_but_a_folder_under_the_root_gets_the_one_message(
    cast: Cast, reward_dirs: Path, layout: Path, value: str
) -> None:
    ranked_study(cast.study, prompts=2)
    request = TrainingRequest(name="pl-x", mode="hf", checkpoint=value)
    with pytest.raises(ValidationError) as caught:
        pl_training_start(study=cast.study, user=cast.researcher, request=request)
    assert caught.value.message_dict["checkpoint"] == [CHECKPOINT_REFUSED]
    assert not PLTraining.objects.exists()


def test_the_absolute_path_of_a_folder_outside_is_refused_too(
    cast: Cast, reward_dirs: Path, layout: Path
) -> None:
    ranked_study(cast.study, prompts=2)
    for value in (str(layout / "outside"), str(layout)):
        request = TrainingRequest(name="pl-x", mode="hf", checkpoint=value)
        with pytest.raises(ValidationError) as caught:
            pl_training_start(study=cast.study, user=cast.researcher, request=request)
        assert caught.value.message_dict["checkpoint"] == [CHECKPOINT_REFUSED]


def test_a_folder_under_the_root_is_accepted_by_name_or_by_its_absolute_path(
    cast: Cast, reward_dirs: Path, layout: Path
) -> None:
    ranked_study(cast.study, prompts=2)
    for name, value in (("pl-a", "good"), ("pl-b", str(layout / "checkpoints" / "good"))):
        request = TrainingRequest(name=name, mode="hf", checkpoint=value)
        training = pl_training_start(study=cast.study, user=cast.researcher, request=request)
        assert training.params["checkpoint"] == value
    assert PLTraining.objects.count() == 2


def test_errors_about_a_folder_under_the_root_name_it_without_the_servers_path(
    cast: Cast, reward_dirs: Path, layout: Path
) -> None:
    ranked_study(cast.study, prompts=2)
    (layout / "checkpoints" / "empty").mkdir()
    request = TrainingRequest(name="pl-x", mode="hf", checkpoint="empty")
    with pytest.raises(ValidationError) as caught:
        pl_training_start(study=cast.study, user=cast.researcher, request=request)
    [message] = caught.value.message_dict["checkpoint"]
    assert message == "checkpoint folder 'empty' has no config.json"
    assert str(layout) not in message


def test_the_form_answers_the_same_for_a_real_folder_outside_and_a_missing_one(
    cast: Cast, reward_dirs: Path, layout: Path
) -> None:
    ranked_study(cast.study, prompts=2)
    client = Client()
    assert client.login(username=cast.researcher.username, password=PASSWORD)
    url = reverse("judges:pl_training_list", args=[cast.study.slug])
    form = {
        "name": "pl-page",
        "recipe": "pairwise",
        "k": "3",
        "sources": ["ranked"],
        "ties": "drop",
        "mode": "hf",
        "epochs": "2",
        "learning_rate": "0.001",
        "holdout": "0.25",
    }
    pages = []
    for value in ("../outside", "../nothing-here", str(layout / "outside"), "/etc/passwd"):
        response = client.post(url, {**form, "checkpoint": value})
        assert response.status_code == 400
        page = response.content.decode()
        assert "checkpoints root (CONCORD_PL_CHECKPOINTS_ROOT)" in page
        assert "does not exist" not in page and "config.json" not in page
        assert str(layout) not in page.replace(value, "")
        pages.append(
            re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", page.replace(value, ""))
        )
    assert len(set(pages)) == 1  # a folder that exists outside reads as one that does not
    assert not PLTraining.objects.exists()
