import numpy as np
import pytest

from rerank.embed.evaluation import image_sentence_ranking, sts_pearson


def test_ranking_by_hand():
    # 3 images on the axes; sentences 0,1 describe image 0, sentence 2 image 1, sentence 3 image 2
    images = np.eye(3)
    sentences = np.array(
        [
            [0.9, 0.1, 0.0],  # image 0 ranks first
            [0.1, 0.0, 0.9],  # image 0 ranks third (behind 2 and 1? 0.1 vs 0.0 vs 0.9)
            [0.6, 0.5, 0.0],  # describes image 1, but image 0 scores higher: rank 2
            [0.0, 0.2, 0.7],
        ]
    )  # image 2 first
    result = image_sentence_ranking(images, sentences, np.array([0, 0, 1, 2]))
    # retrieval ranks: s0 -> 1; s1: scores (0.1, 0.0, 0.9) -> image 0 has one higher -> 2; s2 -> 2; s3 -> 1
    assert result["sentence_to_image"] == {"r@1": 50.0, "r@5": 100.0, "r@10": 100.0, "mrank": 1.5}
    # annotation: image 0's best sentence (s0, 0.9) is beaten by none -> 1;
    # image 1's sentence s2 (0.5) is beaten by none of s0 0.1, s1 0.0, s3 0.2 -> 1;
    # image 2's sentence s3 (0.7) is beaten by s1 (0.9) -> 2
    assert result["image_to_sentence"] == {"r@1": pytest.approx(200 / 3), "r@5": 100.0, "r@10": 100.0, "mrank": 1.0}


def test_ranking_rejects_images_without_sentences():
    with pytest.raises(ValueError):
        image_sentence_ranking(np.eye(3), np.eye(3)[:2], np.array([0, 1]))


def test_sts_pearson_by_hand():
    v1 = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    v2 = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])  # cos 1, 0.7071, 0
    gold = np.array([5.0, 3.0, 0.0])
    expected = np.corrcoef([5.0, 5 * np.sqrt(0.5), 0.0], gold)[0, 1]
    assert sts_pearson(v1, v2, gold) == pytest.approx(expected)
    assert sts_pearson(v1, v2, 5 * np.array([1.0, np.sqrt(0.5), 0.0])) == pytest.approx(1.0)
