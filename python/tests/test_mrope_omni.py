"""posenc.mrope_position_ids for the Omni models (issue 26) against HF's get_rope_index itself,
copied into hf_qwen25_omni_reference.py and hf_qwen3_omni_reference.py and run on the token ids
their processors lay out: Qwen2.5-Omni (rule "v4.49", int64) with and without use_audio_in_video,
Qwen3-Omni-MoE (rule "qwen3-omni", HF's float32 ids as float64)."""
import math

import pytest
import torch

import posenc
import hf_qwen25_omni_reference as hf25
import hf_qwen3_omni_reference as hf3


def posenc_runs(items, qwen3):
    """The same items as posenc runs: bos and eos in the text runs, except a video with audio's."""
    runs, seconds = [], []

    def text(n):
        if runs and runs[-1][0] == "text":
            runs[-1] = ("text", runs[-1][1] + n, 1, 1, 1)
        elif n:
            runs.append(("text", n, 1, 1, 1))

    for item in items:
        kind = item[0]
        if kind == "text":
            text(item[1])
        elif kind == "video" and len(item) == 4:
            runs.append(("video_with_audio", posenc.qwen_omni_audio_tokens(item[3], qwen3), *item[1]))
            seconds.append(item[2])
        else:
            text(1)
            if kind == "audio":
                runs.append(("audio", posenc.qwen_omni_audio_tokens(item[1], qwen3), 1, 1, 1))
            else:
                runs.append((kind, 0, *item[1]))
                seconds += [item[2]] if kind == "video" else []
            text(1)
    return runs, seconds


def check_qwen25(items, use_audio_in_video):
    hf_ids, hf_delta = hf25.Qwen25OmniThinker().get_rope_index(**hf25.layout(items, use_audio_in_video))
    runs, seconds = posenc_runs(items, qwen3=False)
    ids, delta = posenc.mrope_position_ids(runs, 2, rule="v4.49", time_interval=25, video_seconds_per_grid=seconds,
                                           seconds_per_chunk=2)
    assert ids.dtype == torch.int64 and torch.equal(ids, hf_ids[:, 0]), (ids, hf_ids[:, 0])
    assert delta == int(hf_delta)
    return ids


def check_qwen3(items, use_audio_in_video, config=hf3.CONFIG):
    model = hf3.Qwen3OmniMoeThinker(config)
    hf_ids, hf_delta = model.get_rope_index(**hf3.layout(items, use_audio_in_video, config))
    assert hf_ids.dtype == torch.float32
    runs, seconds = posenc_runs(items, qwen3=True)
    ids, delta = posenc.mrope_position_ids(runs, 2, rule="qwen3-omni", time_interval=config.position_id_per_seconds,
                                           video_seconds_per_grid=seconds)
    assert ids.dtype == torch.float64 and torch.equal(ids, hf_ids[:, 0].double()), (ids, hf_ids[:, 0])
    assert isinstance(delta, float) and delta == float(hf_delta)
    return ids


# 520 mel frames are 130 audio tokens (3 chunks of 50 T ids); 400 are 100 (2 whole chunks).
QWEN25_WITH_AUDIO = {
    "several chunks": [("text", 3), ("video", (6, 4, 4), 1.0, 520), ("text", 2)],
    # video T 0, 25, 50, 75 and audio 0..99: both split exactly at 50, the audio ends a chunk
    "boundary hit": [("text", 1), ("video", (4, 4, 4), 1.0, 400), ("text", 1)],
    # 4 s per grid: T 0, 100 with 4 tokens each; HF splits the 100s twice (one split per token)
    "one split per token": [("text", 1), ("video", (3, 4, 4), 4.0, 480), ("text", 2)],
    # more video chunks than audio: the eos follows the last video chunk's max (its rows, columns)
    "video outlasts audio": [("video", (8, 4, 8), 1.0, 60), ("text", 2)],
    # audio chunk last, below the 20 x 20 frame's rows and columns: eos among the video's ids,
    # and the image after it starts at the last piece's max + 1, not the sequence's
    "eos below the frame": [("text", 1), ("video", (1, 40, 40), 1.0, 40), ("text", 1), ("image", (1, 4, 4)),
                            ("text", 2)],
    "image, audio, two videos": [("text", 2), ("image", (1, 4, 6)), ("text", 3), ("audio", 200),
                                 ("video", (4, 4, 4), 1.0, 300), ("text", 1), ("audio", 64), ("text", 2),
                                 ("video", (2, 2, 2), 0.5, 100), ("text", 4)],
    # 3 fps: HF's float32 2/3 s per grid truncated in the model (the processor chunks untruncated)
    "fractional seconds per grid": [("text", 2), ("video", (5, 2, 4), 2 / 3, 700), ("text", 1)],
}


@pytest.mark.parametrize("name", list(QWEN25_WITH_AUDIO))
def test_qwen25_omni_video_with_audio_matches_hf(name):
    check_qwen25(QWEN25_WITH_AUDIO[name], use_audio_in_video=True)


def test_qwen25_omni_bos_and_eos_pairs_share_an_id_and_chunks_interleave():
    """Beside HF: the hand-worked "one split per token" sequence. bos pair at 1; video (T 0, 100,
    200, 4 tokens each) and audio (120 tokens) from 2; video chunks [0, 4), [4, 5), [5, 8), [8, 9),
    [9, 12) (the 100s and the 200s each split twice), audio [0, 50), [50, 100), [100, 120); the
    last chunk is video (T 202): eos pair at 203."""
    ids = check_qwen25(QWEN25_WITH_AUDIO["one split per token"], use_audio_in_video=True)
    T = ids[0].tolist()
    assert T[1:3] == [1, 1] and T[-4:-2] == [203, 203] and T[-2:] == [204, 205]
    video = lambda t: [2 + t]  # noqa: E731
    audio = lambda a, b: list(range(2 + a, 2 + b))  # noqa: E731
    body = video(0) * 4 + audio(0, 50) + video(100) + audio(50, 100) + video(100) * 3 + audio(100, 120) + video(200) * 4
    assert T[3:-4] == body


def test_qwen25_omni_without_audio_in_video_still_matches_hf():
    check_qwen25([("text", 2), ("image", (1, 4, 4)), ("text", 2), ("audio", 90), ("text", 1),
                  ("video", (3, 4, 4), 0.5), ("text", 3)], use_audio_in_video=False)


QWEN3 = {
    # 13 ids per second, 2 s per grid: T 0, 26, 52 against audio 0..38 (300 mel frames)
    "video with audio": ([("text", 3), ("video", (3, 4, 4), 2.0, 300), ("text", 2)], True),
    # the audio outlasts the video: its tail is the last piece
    "audio tail last": ([("text", 1), ("video", (2, 2, 2), 2.0, 300), ("text", 1)], True),
    # the video outlasts the audio: its tail (rows, columns) is the last piece
    "video tail last": ([("video", (6, 4, 8), 2.0, 100), ("text", 2)], True),
    "image, audio, video with audio": ([("text", 2), ("image", (1, 4, 6)), ("text", 1), ("audio", 150), ("text", 2),
                                        ("video", (4, 2, 4), 2 / 3, 250), ("text", 1), ("video", (2, 4, 4), 1.0, 90),
                                        ("text", 3)], True),
    # 3 fps without audio: T 8.666667, 17.333334, .. in float32 (frames 5 and 7 are not the real
    # values rounded once), an eos and text at fractional ids
    "fractional ids": ([("text", 2), ("image", (1, 4, 4)), ("text", 1), ("video", (8, 2, 2), 2 / 3), ("text", 3),
                        ("audio", 120), ("text", 1)], False),
    # the audio's tail is last, below the 20 x 20 frame's rows and columns: eos among the video's
    # ids, the image after it at the last piece's max + 1
    "eos below the frame": ([("text", 1), ("video", (1, 40, 40), 2.0, 50), ("text", 1), ("image", (1, 4, 4)),
                             ("text", 2)], True),
    # T ids past 2^24, where float32 steps by 2: every sum rounds as HF's
    "past 2^24": ([("text", 3), ("video", (2, 2, 2), 1300000.3), ("text", 5), ("image", (1, 4, 4)), ("text", 2)],
                  False),
}


@pytest.mark.parametrize("name", list(QWEN3))
def test_qwen3_omni_float_ids_match_hf(name):
    items, with_audio = QWEN3[name]
    check_qwen3(items, with_audio)


def test_qwen3_omni_keeps_fractional_temporal_steps():
    """12.5 ids per second (the config's position_id_per_seconds set so): video T 0, 12.5, 25, 37.5
    are kept, and the frame at 25 goes before audio token 25 (video first on a tie)."""
    config = hf3.SimpleNamespace(**{**vars(hf3.CONFIG), "position_id_per_seconds": 12.5})
    ids = check_qwen3([("text", 1), ("video", (4, 2, 2), 1.0, 500), ("text", 1)], True, config)
    T, H = ids[0].tolist(), ids[1].tolist()
    s = 3  # text 0, bos 1 and 2
    assert T[1:3] == [1.0, 2.0]  # consecutive bos ids (Qwen2.5-Omni's share one)
    tokens = list(zip(T, H))  # a frame (one token) has H = s, audio token j has T = H = s + j
    assert tokens.index((s + 25.0, s)) == tokens.index((s + 24.0, s + 24.0)) + 1  # the frame before audio 25
    assert tokens.index((s + 12.5, s)) == tokens.index((s + 12.0, s + 12.0)) + 1
    assert [t - s for t in T if t != int(t)] == [12.5, 37.5]


def test_omni_refuses_what_hf_cannot_read():
    aiv = ("video_with_audio", 10, 2, 4, 4)
    with pytest.raises(ValueError, match="seconds_per_chunk must be a finite number > 0, got 0"):
        posenc.mrope_position_ids([aiv], rule="v4.49", time_interval=25, seconds_per_chunk=0)
    with pytest.raises(ValueError, match="got -2"):
        posenc.mrope_position_ids([aiv], rule="v4.49", time_interval=25, seconds_per_chunk=-2)
    with pytest.raises(ValueError, match="nan"):
        posenc.mrope_position_ids([aiv], rule="v4.49", time_interval=25, seconds_per_chunk=math.nan)
    with pytest.raises(ValueError, match=r"int\(time_interval \* seconds_per_chunk\)"):
        posenc.mrope_position_ids([aiv], rule="v4.49", time_interval=25, seconds_per_chunk=0.01)
    with pytest.raises(ValueError, match="does not cut"):
        posenc.mrope_position_ids([aiv], rule="qwen3-omni", time_interval=13, seconds_per_chunk=2)
    with pytest.raises(ValueError, match="rule v5"):
        posenc.mrope_position_ids([aiv], rule="v5")
    with pytest.raises(ValueError, match="all carry their audio or none"):
        posenc.mrope_position_ids([aiv, ("video", 0, 2, 4, 4)], rule="v4.49", time_interval=25)
    with pytest.raises(ValueError, match="all carry their audio or none"):
        posenc.mrope_position_ids([("video", 0, 2, 4, 4), aiv], rule="qwen3-omni", time_interval=13)
    for rule in ("v4.49", "qwen3-omni"):
        with pytest.raises(ValueError, match="an image run's length must be 0.*an image has none"):
            posenc.mrope_position_ids([("image", 5, 1, 4, 4)], rule=rule)  # audio with an image
        with pytest.raises(ValueError, match="audio's token count .* >= 1, got 0"):
            posenc.mrope_position_ids([("video_with_audio", 0, 2, 4, 4)], rule=rule)
        with pytest.raises(ValueError, match="audio run's length .* >= 1, got -3"):
            posenc.mrope_position_ids([("audio", -3, 1, 1, 1)], rule=rule)
        with pytest.raises(ValueError, match="text run's length must be >= 0, got -1"):
            posenc.mrope_position_ids([("text", -1, 1, 1, 1)], rule=rule)
        with pytest.raises(ValueError, match="one per video"):
            posenc.mrope_position_ids([aiv], rule=rule, video_seconds_per_grid=[1.0, 2.0])
    with pytest.raises(ValueError, match="'v5', 'v4.49' or 'qwen3-omni'"):
        posenc.mrope_position_ids([aiv], rule="qwen3")
