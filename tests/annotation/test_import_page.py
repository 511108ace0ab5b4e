"""The researcher's upload page and flagged-answer review, over real HTTP against a live server."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator

import httpx
import pytest
from django.contrib.auth.models import Group, Permission, User
from django.core.exceptions import PermissionDenied
from pytest_django.live_server_helper import LiveServer

from annotation.models import Answer, Prompt, System
from annotation.roles import Role
from annotation.selectors.importing import answer_list_flagged
from annotation.services.leaks import answer_leak_clear
from tests.conftest import PASSWORD, Cast, make_user
from tests.factories import make_prompt_with_answers

Login = Callable[[User | None], httpx.Client]
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def csrf_token(page: httpx.Response) -> str:
    match = CSRF_FIELD.search(page.text)
    assert match, "the page holds no CSRF token"
    return match.group(1)


@pytest.fixture
def login(live_server: LiveServer) -> Iterator[Login]:
    clients: list[httpx.Client] = []

    def log_in(user: User | None) -> httpx.Client:
        client = httpx.Client(base_url=live_server.url, timeout=60)
        clients.append(client)
        if user is None:
            return client
        form = client.get("/accounts/login/")
        response = client.post(
            "/accounts/login/",
            data={
                "username": user.username,
                "password": PASSWORD,
                "csrfmiddlewaretoken": csrf_token(form),
            },
        )
        assert response.status_code == 302, response.text
        return client

    yield log_in
    for client in clients:
        client.close()


def upload(
    client: httpx.Client,
    slug: str,
    name: str,
    content: bytes,
    **flags: bool,
) -> httpx.Response:
    page = client.get(f"/studies/{slug}/import/")
    assert page.status_code == 200
    data = {"csrfmiddlewaretoken": csrf_token(page)}
    data.update({flag: "on" for flag, on in flags.items() if on})
    return client.post(
        f"/studies/{slug}/import/",
        data=data,
        files={"file": (name, content, "application/octet-stream")},
    )


def jsonl(*records: dict) -> bytes:
    return "".join(json.dumps(record) + "\n" for record in records).encode()


SYSTEM = {"type": "system", "name": "atlas-large", "version": "2026-03"}


def prompt_record(external_id: str, text: str = "Use reversed().") -> dict:
    return {
        "id": external_id,
        "category": "coding",
        "turns": ["How do I reverse a list?"],
        "answers": [{"system": "atlas-large", "version": "2026-03", "text": text}],
    }


def test_a_member_researcher_uploads_a_file_and_sees_the_counts(cast: Cast, login: Login) -> None:
    client = login(cast.researcher)

    response = upload(
        client,
        "main-study",
        "study.jsonl",
        jsonl(SYSTEM, prompt_record("p1"), prompt_record("p2", "I am ChatGPT, made by OpenAI.")),
    )

    assert response.status_code == 200
    assert 'id="import-result"' in response.text
    assert "Imported study.jsonl" in response.text
    assert '<strong id="flagged-count">1</strong>' in response.text
    assert Prompt.objects.filter(study=cast.study).count() == 2


def test_an_upload_with_problems_lists_them_by_line_and_writes_nothing(
    cast: Cast, login: Login
) -> None:
    client = login(cast.researcher)
    bad = jsonl(SYSTEM, prompt_record("p1")) + b'{"id": "p2", "turns": [}\n'
    bad += jsonl({"id": "p3", "turns": ["q"], "answers": [{"system": "ghost", "text": "x"}]})

    response = upload(client, "main-study", "study.jsonl", bad)

    assert response.status_code == 400
    assert 'id="import-errors"' in response.text
    assert "line 3: invalid JSON" in response.text
    assert "line 4: <code>answers[0].system</code>: unknown system" in response.text
    assert Prompt.objects.count() == 0
    assert System.objects.count() == 0


def test_a_dry_run_upload_reports_and_writes_nothing(cast: Cast, login: Login) -> None:
    client = login(cast.researcher)

    response = upload(
        client, "main-study", "study.jsonl", jsonl(SYSTEM, prompt_record("p1")), dry_run=True
    )

    assert response.status_code == 200
    assert "Dry run of study.jsonl: nothing was written" in response.text
    assert Prompt.objects.count() == 0


def test_systems_named_only_in_answers_need_the_add_systems_box(cast: Cast, login: Login) -> None:
    client = login(cast.researcher)
    content = b"prompt_id,turn_1,system,answer\np1,Reverse a list?,cirrus,Use reversed().\n"

    refused = upload(client, "main-study", "study.csv", content)
    accepted = upload(client, "main-study", "study.csv", content, add_systems=True)

    assert "unknown system &#x27;cirrus&#x27; version &#x27;&#x27;" in refused.text
    assert accepted.status_code == 200
    assert System.objects.filter(study=cast.study, name="cirrus").exists()


def test_an_upload_larger_than_memory_uploads_is_imported_from_disk(
    cast: Cast, login: Login, settings: object
) -> None:
    # Above FILE_UPLOAD_MAX_MEMORY_SIZE (5 MB), Django streams the upload to a temporary file.
    filler = "word " * 400
    records = [SYSTEM] + [prompt_record(f"p{n:05d}", f"{n} {filler}") for n in range(3_000)]
    content = jsonl(*records)
    assert len(content) > 5 * 1024 * 1024
    client = login(cast.researcher)

    response = upload(client, "main-study", "big.jsonl", content)

    assert response.status_code == 200, response.text[:2000]
    assert Answer.objects.filter(prompt__study=cast.study).count() == 3_000


def test_an_unsupported_file_type_is_refused_by_the_form(cast: Cast, login: Login) -> None:
    client = login(cast.researcher)

    response = upload(client, "main-study", "study.xlsx", b"PK\x03\x04")

    assert response.status_code == 400
    assert "Unsupported file type" in response.text


def test_who_may_open_the_import_page_and_who_gets_404(cast: Cast, login: Login) -> None:
    worker = cast.worker_one.user
    assert worker is not None
    expected = [
        (cast.admin, "main-study", 200),
        (cast.admin, "other-study", 200),
        (cast.researcher, "main-study", 200),
        (cast.researcher, "other-study", 404),  # a researcher who is not a member
        (worker, "main-study", 404),
        (cast.outsider, "main-study", 404),
    ]
    seen = []
    for user, slug, _ in expected:
        client = login(user)
        prompts_before = Prompt.objects.filter(study__slug=slug).count()
        page = client.get(f"/studies/{slug}/import/")
        # A refused user cannot import by posting either; the token is the one the cookie holds.
        post = client.post(
            f"/studies/{slug}/import/",
            data={"csrfmiddlewaretoken": client.cookies.get("csrftoken", "")},
            files={"file": ("s.jsonl", jsonl(SYSTEM, prompt_record("p1")), "text/plain")},
        )
        seen.append((user, slug, page.status_code))
        if page.status_code == 404:
            assert post.status_code == 404
            assert Prompt.objects.filter(study__slug=slug).count() == prompts_before

    assert seen == expected


def test_a_researcher_without_the_import_permission_may_not_import(
    cast: Cast, login: Login
) -> None:
    researchers = Group.objects.get(name=Role.RESEARCHER)
    researchers.permissions.remove(Permission.objects.get(codename="import_study"))
    client = login(cast.researcher)

    assert client.get("/studies/main-study/import/").status_code == 404
    assert client.get("/studies/main-study/").status_code == 200


def test_an_anonymous_visitor_is_sent_to_log_in(cast: Cast, login: Login) -> None:
    client = login(None)

    response = client.get("/studies/main-study/import/")

    assert response.status_code == 302
    assert response.headers["location"].startswith(
        "/accounts/login/?next=/studies/main-study/import/"
    )


def test_the_study_page_links_to_import_and_flagged_answers(cast: Cast, login: Login) -> None:
    client = login(cast.researcher)

    page = client.get("/studies/main-study/")

    assert 'href="/studies/main-study/import/"' in page.text
    assert 'href="/studies/main-study/flagged/"' in page.text


def flag(answer: Answer, text: str) -> Answer:
    answer.turns = [text]
    answer.leak_matches = ["I am Claude"]
    answer.leak_flagged = True
    answer.save()
    return answer


def test_the_flagged_page_shows_matched_phrases_and_escapes_the_answer(
    cast: Cast, login: Login
) -> None:
    _, (flagged, clean) = make_prompt_with_answers(cast.study)
    flag(flagged, '<script>alert("x")</script> I am Claude.')
    client = login(cast.researcher)

    page = client.get("/studies/main-study/flagged/")

    assert page.status_code == 200
    assert "<mark>I am Claude</mark>" in page.text
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page.text
    assert "<script>alert" not in page.text
    assert f'id="answer-{flagged.pk}"' in page.text
    assert f'id="answer-{clean.pk}"' not in page.text


def test_a_member_researcher_clears_a_flag(cast: Cast, login: Login) -> None:
    _, (flagged, _) = make_prompt_with_answers(cast.study)
    flag(flagged, "I am Claude.")
    client = login(cast.researcher)
    page = client.get("/studies/main-study/flagged/")

    response = client.post(
        f"/studies/main-study/flagged/{flagged.pk}/clear/",
        data={"csrfmiddlewaretoken": csrf_token(page)},
    )

    assert response.status_code == 302
    flagged.refresh_from_db()
    assert flagged.leak_cleared_by == cast.researcher
    assert flagged.usable_in_pairs
    assert "Cleared by rhea-researcher" in client.get("/studies/main-study/flagged/").text


def test_who_may_not_clear_a_flag_gets_404_and_the_flag_stays(cast: Cast, login: Login) -> None:
    _, (flagged, _) = make_prompt_with_answers(cast.study)
    flag(flagged, "I am Claude.")
    refused = [
        cast.worker_one.user,
        cast.outsider,
        make_user("nora-researcher", Role.RESEARCHER),  # a researcher who is not a member
    ]
    codes = []
    for user in refused:
        assert user is not None
        client = login(user)
        client.get("/accounts/login/")  # sets the CSRF cookie used below
        listing = client.get("/studies/main-study/flagged/")
        response = client.post(
            f"/studies/main-study/flagged/{flagged.pk}/clear/",
            data={"csrfmiddlewaretoken": client.cookies.get("csrftoken", "")},
        )
        codes.append((listing.status_code, response.status_code))

    assert codes == [(404, 404)] * len(refused)
    flagged.refresh_from_db()
    assert flagged.leak_cleared_at is None


def test_a_flag_cannot_be_cleared_through_another_studys_url(cast: Cast, login: Login) -> None:
    _, (flagged, _) = make_prompt_with_answers(cast.study)
    flag(flagged, "I am Claude.")
    _, (other, _) = make_prompt_with_answers(cast.other_study, systems=("sys-c", "sys-d"))
    flag(other, "I am Gemini.")  # so the admin's page holds a form and its token
    client = login(cast.admin)
    page = client.get("/studies/other-study/flagged/")

    response = client.post(
        f"/studies/other-study/flagged/{flagged.pk}/clear/",
        data={"csrfmiddlewaretoken": csrf_token(page)},
    )

    assert response.status_code == 404
    flagged.refresh_from_db()
    assert flagged.leak_cleared_at is None


class TestClearService:
    """The service checks the user itself, whatever door calls it."""

    def test_a_member_researcher_and_an_admin_may_clear(self, cast: Cast) -> None:
        _, (first, second) = make_prompt_with_answers(cast.study)
        flag(first, "I am Claude.")
        flag(second, "I am Gemini.")

        answer_leak_clear(answer=first, user=cast.researcher)
        answer_leak_clear(answer=second, user=cast.admin)

        assert first.leak_cleared_by == cast.researcher
        assert second.leak_cleared_by == cast.admin

    @pytest.mark.parametrize("who", ["worker", "outsider", "non-member researcher"])
    def test_anyone_else_is_refused(self, cast: Cast, who: str) -> None:
        _, (answer, _) = make_prompt_with_answers(cast.study)
        flag(answer, "I am Claude.")
        user = {
            "worker": cast.worker_one.user,
            "outsider": cast.outsider,
            "non-member researcher": make_user("nora-researcher", Role.RESEARCHER),
        }[who]
        assert user is not None

        with pytest.raises(PermissionDenied):
            answer_leak_clear(answer=answer, user=user)

        answer.refresh_from_db()
        assert answer.leak_cleared_at is None

    def test_clearing_twice_keeps_the_first_reviewer(self, cast: Cast) -> None:
        _, (answer, _) = make_prompt_with_answers(cast.study)
        flag(answer, "I am Claude.")

        answer_leak_clear(answer=answer, user=cast.researcher)
        answer_leak_clear(answer=answer, user=cast.admin)

        assert answer.leak_cleared_by == cast.researcher

    def test_flagged_answers_are_listed_only_for_who_may_read_the_study(self, cast: Cast) -> None:
        _, (answer, _) = make_prompt_with_answers(cast.study)
        flag(answer, "I am Claude.")

        assert list(answer_list_flagged(user=cast.researcher, study=cast.study)) == [answer]
        assert list(answer_list_flagged(user=cast.outsider, study=cast.study)) == []
        assert list(answer_list_flagged(user=cast.researcher, study=cast.other_study)) == []
